/* SPDX-License-Identifier: MIT */
/*
 * The symbol cache (see symbols.h): symtabs shared by build ID.
 *
 * A build ID is what a file claims, and the files are the profiled
 * processes' choice: only files root owns and nobody else may write are
 * shared by build ID alone. Any other file's key adds its identity, so a
 * crafted file that claims libc's build ID gets a table of its own and
 * never replaces or stands in for libc's in other users' profiles.
 *
 * Not thread-safe; it belongs to the agent's event loop. Its two maps:
 * by_key (build ID, or "@dev:ino:size:mtime" for objects without one) owns
 * the symtabs, one per distinct object; by_path remembers which symtab a
 * path gave last time together with the file's identity, so a repeated
 * get costs one stat(). by_path is bounded and simply emptied when full: a
 * miss there only costs reading the build ID note.
 */
#include "symbols-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#define PATH_MAP_MAX      4096u
#define DEFAULT_DEBUG_DIR "/usr/lib/debug"

/* ---- the cache ---- */

struct entry {
        struct entry *next;
        struct fp_symtab *tab; /* one reference */
        dev_t dev;             /* by_path only: the file's identity when it was read */
        ino_t ino;
        off_t size;
        struct timespec mtime;
        char key[];
};

struct map {
        struct entry **buckets;
        size_t n_buckets, n;
};

struct fp_symcache {
        struct map by_key;
        struct map by_path;
        struct fp_symtab *vdso, *kernel;
        size_t n_loaded;
        size_t max_files;
        char *debug_dir;
};

static uint64_t hash_str(const char *s)
{
        uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
        return h;
}

static struct entry **map_slot(const struct map *m, const char *key)
{
        struct entry **p;

        if (!m->n_buckets)
                return NULL;
        p = &m->buckets[hash_str(key) & (m->n_buckets - 1)];
        while (*p && strcmp((*p)->key, key) != 0)
                p = &(*p)->next;
        return p;
}

static struct entry *map_find(const struct map *m, const char *key)
{
        struct entry **p = map_slot(m, key);

        return p ? *p : NULL;
}

static void entry_free(struct entry *e)
{
        if (e) {
                fp_symtab_unref(e->tab);
                free(e);
        }
}

static void map_clear(struct map *m)
{
        for (size_t i = 0; i < m->n_buckets; i++) {
                while (m->buckets[i]) {
                        struct entry *e = m->buckets[i];

                        m->buckets[i] = e->next;
                        entry_free(e);
                }
        }
        m->n = 0;
}

/* Removes key's entry, if any, dropping its reference. */
static void map_remove(struct map *m, const char *key)
{
        struct entry **p = map_slot(m, key), *e;

        if (!p || !*p)
                return;
        e = *p;
        *p = e->next;
        m->n--;
        entry_free(e);
}

/* Inserts e (whose key must not be present); the map takes ownership on success. */
static int map_insert(struct map *m, struct entry *e)
{
        struct entry **p;

        if (m->n + 1 > m->n_buckets / 4 * 3) {
                size_t nb = m->n_buckets ? m->n_buckets * 2 : 64;
                struct entry **b;

                if (nb > SIZE_MAX / sizeof(*b))
                        return -ENOMEM;
                b = calloc(nb, sizeof(*b));
                if (!b)
                        return -ENOMEM;
                for (size_t i = 0; i < m->n_buckets; i++) {
                        while (m->buckets[i]) {
                                struct entry *x = m->buckets[i];

                                m->buckets[i] = x->next;
                                x->next = b[hash_str(x->key) & (nb - 1)];
                                b[hash_str(x->key) & (nb - 1)] = x;
                        }
                }
                free(m->buckets);
                m->buckets = b;
                m->n_buckets = nb;
        }
        p = &m->buckets[hash_str(e->key) & (m->n_buckets - 1)];
        e->next = *p;
        *p = e;
        m->n++;
        return 0;
}

static struct entry *entry_new(const char *key)
{
        size_t len = strlen(key) + 1;
        struct entry *e;

        if (len > SIZE_MAX - sizeof(*e))
                return NULL;
        e = calloc(1, sizeof(*e) + len);
        if (e)
                memcpy(e->key, key, len);
        return e;
}

struct fp_symcache *fp_symcache_new(void)
{
        struct fp_symcache *c;

        if (elf_version(EV_CURRENT) == EV_NONE)
                return NULL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->max_files = FP_SYMCACHE_MAX_FILES;
        c->debug_dir = strdup(DEFAULT_DEBUG_DIR);
        if (!c->debug_dir) {
                free(c);
                return NULL;
        }
        return c;
}

void fp_symcache_free(struct fp_symcache *c)
{
        if (!c)
                return;
        map_clear(&c->by_key);
        map_clear(&c->by_path);
        free(c->by_key.buckets);
        free(c->by_path.buckets);
        fp_symtab_unref(c->vdso);
        fp_symtab_unref(c->kernel);
        free(c->debug_dir);
        free(c);
}

int fp_symcache_set_debug_dir(struct fp_symcache *c, const char *dir)
{
        char *d = NULL;

        if (!c)
                return -EINVAL;
        if (dir) {
                d = strdup(dir);
                if (!d)
                        return -ENOMEM;
        }
        free(c->debug_dir);
        c->debug_dir = d;
        return 0;
}

size_t fp_symcache_n_loaded(const struct fp_symcache *c)
{
        return c ? c->n_loaded : 0;
}

void fp_symcache_set_max_files(struct fp_symcache *c, size_t max)
{
        c->max_files = max;
}

size_t fp_symcache_n_files(const struct fp_symcache *c)
{
        return c ? c->by_key.n : 0;
}

/* Past max_files: forgets the paths, then every table nothing but the cache holds. */
static void evict(struct fp_symcache *c)
{
        if (c->by_key.n < c->max_files)
                return;
        map_clear(&c->by_path);
        for (size_t i = 0; i < c->by_key.n_buckets; i++) {
                for (struct entry **p = &c->by_key.buckets[i]; *p;) {
                        struct entry *e = *p;
                        if (fp_symtab_shared(e->tab)) {
                                p = &e->next;
                                continue;
                        }
                        *p = e->next;
                        c->by_key.n--;
                        entry_free(e);
                }
        }
}

static bool same_file(const struct entry *e, const struct stat *st)
{
        return e->dev == st->st_dev && e->ino == st->st_ino && e->size == st->st_size &&
               e->mtime.tv_sec == st->st_mtim.tv_sec && e->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* Remembers that path (the file st describes) gave tab. 0 or -ENOMEM. */
static int remember_path(struct fp_symcache *c, const char *path, const struct stat *st,
                         struct fp_symtab *tab)
{
        struct entry *e;
        int r;

        map_remove(&c->by_path, path);
        if (c->by_path.n >= PATH_MAP_MAX)
                map_clear(&c->by_path);
        e = entry_new(path);
        if (!e)
                return -ENOMEM;
        e->dev = st->st_dev;
        e->ino = st->st_ino;
        e->size = st->st_size;
        e->mtime = st->st_mtim;
        e->tab = fp_symtab_ref(tab);
        r = map_insert(&c->by_path, e);
        if (r < 0)
                entry_free(e);
        return r;
}

/* 0 when the file st describes may be read: the one wanted (-ESTALE), not too large (-EFBIG). */
static int check_file(const struct stat *st, const struct fp_file_id *want)
{
        if (want && ((uint64_t)st->st_dev != want->dev || (uint64_t)st->st_ino != want->ino))
                return -ESTALE;
        return st->st_size > (off_t)FP_SYM_MAX_FILE_BYTES ? -EFBIG : 0;
}

int fp_symcache_get(struct fp_symcache *c, const char *path, const struct fp_file_id *want,
                    struct fp_symtab **ret)
{
        _cleanup_close_ int fd = -1;
        _cleanup_(elf_endp) Elf *elf = NULL;
        struct fp_symtab *tab;
        struct entry *e;
        char bid[KEY_MAX], key[KEY_MAX + 96];
        struct stat st;
        bool trusted;
        int r;

        if (!c || !path || !ret)
                return -EINVAL;
        if (stat(path, &st) < 0)
                return -errno;
        if ((r = check_file(&st, want)) < 0)
                return r;
        e = map_find(&c->by_path, path);
        if (e && same_file(e, &st)) {
                *ret = fp_symtab_ref(e->tab);
                return 0;
        }

        r = fp_sym_open_elf(path, &fd, &elf, &st);
        if (r < 0)
                return r;
        if ((r = check_file(&st, want)) < 0) /* replaced between the stat() and the open() */
                return r;
        fp_sym_read_build_id(elf, bid);
        trusted = st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
        if (bid[0] && trusted)
                snprintf(key, sizeof(key), "%s", bid);
        else
                snprintf(key, sizeof(key),
                         "%s@%" PRIx64 ":%" PRIu64 ":%" PRId64 ":%" PRId64 ".%09ld", bid,
                         (uint64_t)st.st_dev, (uint64_t)st.st_ino, (int64_t)st.st_size,
                         (int64_t)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);

        e = map_find(&c->by_key, key);
        if (e && !fp_sym_symtab_full(e->tab) && fp_sym_elf_has_symtab(elf)) {
                /*
                 * A stripped copy was seen first; this file of the same build
                 * has the full table. Later lookups get the richer one; holders
                 * of the old reference keep it.
                 */
                r = fp_sym_load_elf(elf, bid, c->debug_dir, false, &tab);
                if (r < 0)
                        return r;
                fp_symtab_unref(e->tab);
                e->tab = tab;
                c->n_loaded++;
                map_clear(&c->by_path); /* paths remembered with the old table */
        } else if (e) {
                tab = e->tab;
        } else {
                evict(c);
                r = fp_sym_load_elf(elf, bid, c->debug_dir, false, &tab);
                if (r < 0)
                        return r;
                e = entry_new(key);
                if (!e) {
                        fp_symtab_unref(tab);
                        return -ENOMEM;
                }
                e->tab = tab;
                r = map_insert(&c->by_key, e);
                if (r < 0) {
                        entry_free(e);
                        return r;
                }
                c->n_loaded++;
        }
        r = remember_path(c, path, &st, tab);
        if (r < 0)
                return r;
        *ret = fp_symtab_ref(tab);
        return 0;
}

int fp_symcache_get_vdso(struct fp_symcache *c, struct fp_symtab **ret)
{
        int r;

        if (!c || !ret)
                return -EINVAL;
        if (!c->vdso) {
                r = fp_sym_load_vdso(&c->vdso);
                if (r < 0)
                        return r;
                c->n_loaded++;
        }
        *ret = fp_symtab_ref(c->vdso);
        return 0;
}

int fp_symcache_get_kernel(struct fp_symcache *c, struct fp_symtab **ret)
{
        int r;

        if (!c || !ret)
                return -EINVAL;
        if (!c->kernel) {
                r = fp_symtab_from_kallsyms("/proc/kallsyms", &c->kernel);
                if (r < 0)
                        return r;
        }
        *ret = fp_symtab_ref(c->kernel);
        return 0;
}
