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
 * Its two maps: by_key (build ID, or "@dev:ino:size:mtime" for objects
 * without one) owns the symtabs, one per distinct object; by_path
 * remembers which symtab a path gave last time together with the file's
 * identity, so a repeated get costs one stat(). by_path is bounded and
 * simply emptied when full: a miss there only costs reading the build ID
 * note.
 *
 * Files are read on the loader threads (symbols.h), which look the maps up
 * under the cache's lock; the requester (the agent's event loop) puts what
 * they read into the maps, under the lock too. The API is for one
 * requester thread.
 */
#include "symbols-internal.h"

#include "log.h"
#include "procfs.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <time.h>

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
        uint32_t owner; /* by_key only: whom its table is charged to ... */
        size_t charged; /* ... and how many bytes (0: nobody's charge) */
        char key[];
};

/* The bytes of tables charged to one owner (FP_SYMCACHE_USER_BYTES). */
struct charge {
        uint32_t owner;
        size_t bytes;
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
        size_t by_source[FP_SYM_SOURCES]; /* of n_loaded's files: where their names came from */
        /* Of those, files each runtime's inspector found its runtime in, and refused */
        size_t runtime_files[FP_SYM_INSPECTORS], runtime_refused[FP_SYM_INSPECTORS];
        size_t max_files;
        char *debug_dir;
        struct charge *charges;
        size_t n_charges, cap_charges;
        size_t user_bytes; /* FP_SYMCACHE_USER_BYTES */

        /* The loader threads; everything above is theirs too, under lock. */
        pthread_mutex_t lock;
        pthread_cond_t work;     /* a load was queued or a device freed (CLOCK_MONOTONIC) */
        pthread_cond_t finished; /* a load is done or a loader exited (CLOCK_MONOTONIC) */
        struct fp_symload *queue;
        struct fp_symload *running[FP_SYMLOAD_THREADS];
        uint64_t run_ns[FP_SYMLOAD_THREADS]; /* when each slot's load started */
        pid_t tids[FP_SYMLOAD_THREADS];
        size_t n_threads, n_started, n_exited;
        size_t n_loads; /* asked for and not yet collected or cancelled */
        bool stopping;
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

/* A CLOCK_MONOTONIC time in nanoseconds as the timespec pthread_cond_timedwait() takes. */
static struct timespec mono_ts(uint64_t ns)
{
        return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ULL),
                                 .tv_nsec = (long)(ns % 1000000000ULL)};
}

/* A load (symbols.h): shared by its requester and the loader until both let go. */
struct fp_symload {
        struct fp_symload *next; /* c->queue */
        unsigned refs;           /* under c->lock */
        bool done;               /* under c->lock */
        bool has_want, cached, fresh;
        bool slow;              /* the requester stopped waiting: logged when read */
        bool reported;          /* its refusal was logged */
        struct fp_file_id want; /* all 0 without one: device 0, see holds_device() */
        uint32_t owner;         /* whose process it is read for (0: root's) */
        uint64_t start_ns;      /* when it was asked for */
        int r;                  /* done: 0 or the last path's error */
        size_t n_paths, won;    /* won: the path the table came from */
        char *paths[FP_SYMLOAD_MAX_PATHS];
        struct stat st; /* done, r == 0: the file read */
        char key[KEY_MAX + 96];
        struct fp_symtab *tab; /* done, r == 0: a reference */
};

static void load_unref_locked(struct fp_symload *j)
{
        if (--j->refs)
                return;
        for (size_t i = 0; i < j->n_paths; i++)
                free(j->paths[i]);
        fp_symtab_unref(j->tab);
        free(j);
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
        c->user_bytes = FP_SYMCACHE_USER_BYTES;
        c->debug_dir = strdup(DEFAULT_DEBUG_DIR);
        if (!c->debug_dir) {
                free(c);
                return NULL;
        }
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->work, &ca);
        pthread_cond_init(&c->finished, &ca);
        pthread_condattr_destroy(&ca);
        return c;
}

void fp_symcache_free(struct fp_symcache *c)
{
        uint64_t deadline;
        bool stuck;

        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->stopping = true;
        pthread_cond_broadcast(&c->work);
        deadline = fp_now_ns(CLOCK_MONOTONIC) + FP_SYMLOAD_STOP_MS * 1000000ULL;
        while (c->n_exited < c->n_started || c->n_started < c->n_threads) {
                struct timespec ts = mono_ts(deadline);
                if (pthread_cond_timedwait(&c->finished, &c->lock, &ts) == ETIMEDOUT)
                        break;
        }
        stuck = c->n_exited < c->n_threads;
        while (c->queue) {
                struct fp_symload *j = c->queue;
                c->queue = j->next;
                load_unref_locked(j);
        }
        pthread_mutex_unlock(&c->lock);
        if (stuck) {
                /* A loader is inside a read that does not return (a hung mount): it keeps c. */
                fp_log(LOG_WARNING, "a symbol loader is still reading a file; leaving it");
                return;
        }
        pthread_cond_destroy(&c->work);
        pthread_cond_destroy(&c->finished);
        pthread_mutex_destroy(&c->lock);
        map_clear(&c->by_key);
        map_clear(&c->by_path);
        free(c->by_key.buckets);
        free(c->by_path.buckets);
        free(c->charges);
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

size_t fp_symcache_n_runtime(const struct fp_symcache *c, size_t which, size_t *ret_refused)
{
        bool ok = c && which < FP_SYM_INSPECTORS;
        if (ret_refused)
                *ret_refused = ok ? c->runtime_refused[which] : 0;
        return ok ? c->runtime_files[which] : 0;
}

void fp_symcache_count_refusal(struct fp_symcache *c, size_t which)
{
        if (c && which < FP_SYM_INSPECTORS)
                c->runtime_refused[which]++;
}

size_t fp_symcache_n_by_source(const struct fp_symcache *c, enum fp_sym_source source)
{
        return c && source < FP_SYM_SOURCES ? c->by_source[source] : 0;
}

void fp_symcache_set_max_files(struct fp_symcache *c, size_t max)
{
        c->max_files = max;
}

void fp_symcache_set_user_bytes(struct fp_symcache *c, size_t bytes)
{
        c->user_bytes = bytes;
}

size_t fp_symcache_n_files(const struct fp_symcache *c)
{
        return c ? c->by_key.n : 0;
}

/* owner's charge; created (at 0) when create. NULL when none (or out of memory). */
static struct charge *charge_of(struct fp_symcache *c, uint32_t owner, bool create)
{
        for (size_t i = 0; i < c->n_charges; i++)
                if (c->charges[i].owner == owner)
                        return &c->charges[i];
        if (!create || fp_grow((void **)&c->charges, &c->cap_charges, c->n_charges + 1,
                               sizeof(*c->charges)) < 0)
                return NULL;
        c->charges[c->n_charges] = (struct charge){.owner = owner};
        return &c->charges[c->n_charges++];
}

static void uncharge(struct fp_symcache *c, struct entry *e)
{
        struct charge *u = e->charged ? charge_of(c, e->owner, false) : NULL;

        if (u)
                u->bytes -= e->charged;
        e->charged = 0;
}

/*
 * Forgets the paths, then every table nothing but the cache holds (of
 * owner's charge only, when only_charged).
 */
static void forget_unheld(struct fp_symcache *c, bool only_charged, uint32_t owner)
{
        map_clear(&c->by_path);
        for (size_t i = 0; i < c->by_key.n_buckets; i++) {
                for (struct entry **p = &c->by_key.buckets[i]; *p;) {
                        struct entry *e = *p;
                        if (fp_symtab_shared(e->tab) ||
                            (only_charged && (!e->charged || e->owner != owner))) {
                                p = &e->next;
                                continue;
                        }
                        *p = e->next;
                        c->by_key.n--;
                        uncharge(c, e);
                        entry_free(e);
                }
        }
}

/* Past max_files: forgets the paths, then every table nothing but the cache holds. */
static void evict(struct fp_symcache *c)
{
        if (c->by_key.n >= c->max_files)
                forget_unheld(c, false, 0);
}

/*
 * Charges bytes to owner, first forgetting owner's unheld tables when they
 * would pass FP_SYMCACHE_USER_BYTES; -EDQUOT when they still would.
 */
static int charge(struct fp_symcache *c, uint32_t owner, size_t bytes)
{
        struct charge *u = charge_of(c, owner, true);

        if (!u)
                return -ENOMEM;
        if (u->bytes + bytes > c->user_bytes)
                forget_unheld(c, true, owner); /* lowers u->bytes; charges stay where they are */
        if (u->bytes + bytes > c->user_bytes)
                return -EDQUOT;
        u->bytes += bytes;
        return 0;
}

size_t fp_symcache_charged(struct fp_symcache *c, uint32_t owner)
{
        struct charge *u;
        size_t n;

        pthread_mutex_lock(&c->lock);
        u = charge_of(c, owner, false);
        n = u ? u->bytes : 0;
        pthread_mutex_unlock(&c->lock);
        return n;
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

/* ---- the loader threads ---- */

/*
 * On a loader thread: the table of path (the file want names) into j:
 * a reference to the cached one when the path or the build ID is known
 * (j->cached), else one read now (j->fresh). The cache's maps are read
 * under c->lock; the file's reads are not.
 */
static int load_path(struct fp_symcache *c, const char *path, struct fp_symload *j)
{
        const struct fp_file_id *want = j->has_want ? &j->want : NULL;
        _cleanup_close_ int fd = -1;
        _cleanup_(elf_endp) Elf *elf = NULL;
        char bid[KEY_MAX];
        struct entry *e;
        struct stat st;
        bool trusted, have = false;
        int r;

        if (stat(path, &st) < 0)
                return -errno;
        if ((r = check_file(&st, want)) < 0)
                return r;
        pthread_mutex_lock(&c->lock);
        e = map_find(&c->by_path, path);
        if (e && same_file(e, &st)) {
                j->tab = fp_symtab_ref(e->tab);
                j->cached = true;
        }
        pthread_mutex_unlock(&c->lock);
        if (j->cached)
                return 0;

        r = fp_elf_open(path, &fd, &elf, &st);
        if (r < 0)
                return r;
        if ((r = check_file(&st, want)) < 0) /* replaced between the stat() and the open() */
                return r;
        fp_elf_build_id(elf, bid);
        trusted = st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
        if (bid[0] && trusted)
                snprintf(j->key, sizeof(j->key), "%s", bid);
        else
                snprintf(j->key, sizeof(j->key),
                         "%s@%" PRIx64 ":%" PRIu64 ":%" PRId64 ":%" PRId64 ".%09ld", bid,
                         (uint64_t)st.st_dev, (uint64_t)st.st_ino, (int64_t)st.st_size,
                         (int64_t)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
        j->st = st;

        /* A stripped copy seen first does not stand for a file with the full table. */
        pthread_mutex_lock(&c->lock);
        e = map_find(&c->by_key, j->key);
        if (e && (fp_sym_symtab_full(e->tab) || !fp_elf_has_symtab(elf))) {
                j->tab = fp_symtab_ref(e->tab);
                have = true;
        }
        pthread_mutex_unlock(&c->lock);
        if (have)
                return 0;
        struct fp_sym_origin origin = {path, st.st_uid};
        r = fp_sym_load_elf(elf, bid, &origin, c->debug_dir, false, &j->tab);
        if (r < 0)
                return r;
        j->fresh = true;
        return 0;
}

/*
 * Whether the load on loader slot holds its device from other loads: while
 * young (most reads end soon) and while its thread is not running (waiting
 * on the device: a hung mount must not take every loader), but not while
 * it computes (a file of millions of symbols must not hold up the others
 * on the same disk). Under c->lock.
 */
static bool holds_device(const struct fp_symcache *c, size_t slot)
{
        uint64_t age = fp_now_ns(CLOCK_MONOTONIC) - c->run_ns[slot];
        char state = '?'; /* unknown: as if waiting */

        if (age < FP_SYMLOAD_STALL_MS * 1000000ULL)
                return true;
        (void)fp_proc_stat(c->tids[slot], &state); /* a thread's /proc/TID/stat */
        return state != 'R';
}

/*
 * The next load a loader may run: queued, its device not held by another
 * load, and no other load of its owner (other than root) running.
 */
static struct fp_symload **next_runnable(struct fp_symcache *c)
{
        for (struct fp_symload **p = &c->queue; *p; p = &(*p)->next) {
                bool busy = false;

                for (size_t i = 0; i < FP_SYMLOAD_THREADS && !busy; i++)
                        busy = c->running[i] &&
                               ((c->running[i]->owner && c->running[i]->owner == (*p)->owner) ||
                                (c->running[i]->want.dev == (*p)->want.dev && holds_device(c, i)));
                if (!busy)
                        return p;
        }
        return NULL;
}

static void *loader_main(void *arg)
{
        struct fp_symcache *c = arg;
        size_t slot;

        pthread_mutex_lock(&c->lock);
        slot = c->n_started++;
        c->tids[slot] = (pid_t)syscall(SYS_gettid);
        for (;;) {
                struct fp_symload **p = NULL, *j;

                while (!c->stopping && !(p = next_runnable(c))) {
                        if (!c->queue) {
                                pthread_cond_wait(&c->work, &c->lock);
                                continue;
                        }
                        /* Loads wait for a device: judge it again as its read ages. */
                        struct timespec ts =
                            mono_ts(fp_now_ns(CLOCK_MONOTONIC) + FP_SYMLOAD_STALL_MS * 1000000ULL);
                        pthread_cond_timedwait(&c->work, &c->lock, &ts);
                }
                if (c->stopping)
                        break;
                j = *p;
                *p = j->next;
                j->next = NULL;
                c->running[slot] = j;
                c->run_ns[slot] = fp_now_ns(CLOCK_MONOTONIC);
                pthread_mutex_unlock(&c->lock);

                j->r = -ENOENT;
                for (size_t i = 0; i < j->n_paths; i++) {
                        j->r = load_path(c, j->paths[i], j);
                        if (j->r == 0) {
                                j->won = i;
                                break;
                        }
                }

                pthread_mutex_lock(&c->lock);
                c->running[slot] = NULL;
                j->done = true;
                load_unref_locked(j);
                pthread_cond_broadcast(&c->finished);
                pthread_cond_broadcast(&c->work); /* its device is free again */
        }
        c->n_exited++;
        pthread_cond_broadcast(&c->finished);
        pthread_mutex_unlock(&c->lock);
        return NULL;
}

/* Starts the loader threads on first use. Under c->lock. */
static int start_loaders(struct fp_symcache *c)
{
        while (c->n_threads < FP_SYMLOAD_THREADS) {
                pthread_attr_t attr;
                pthread_t t;
                int r;

                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                c->n_threads++;
                r = pthread_create(&t, &attr, loader_main, c);
                pthread_attr_destroy(&attr);
                if (r != 0) {
                        c->n_threads--;
                        return c->n_threads ? 0 : -r;
                }
        }
        return 0;
}

static bool same_load(const struct fp_symload *j, const struct fp_file_id *want)
{
        return j->has_want && j->want.dev == want->dev && j->want.ino == want->ino;
}

/* A load of want's file not done yet: queued or being read. Under c->lock. */
static struct fp_symload *find_load(struct fp_symcache *c, const struct fp_file_id *want)
{
        for (size_t i = 0; i < FP_SYMLOAD_THREADS; i++)
                if (c->running[i] && same_load(c->running[i], want))
                        return c->running[i];
        for (struct fp_symload *j = c->queue; j; j = j->next)
                if (same_load(j, want))
                        return j;
        return NULL;
}

/* Whether a loader thread is waiting for work. Under c->lock. */
static bool loader_idle(const struct fp_symcache *c)
{
        size_t busy = 0;

        for (size_t i = 0; i < FP_SYMLOAD_THREADS; i++)
                busy += c->running[i] != NULL;
        return busy < c->n_threads;
}

/* Waits until j is done or deadline_ns (CLOCK_MONOTONIC; 0: for ever) passes. Under c->lock. */
static void wait_done(struct fp_symcache *c, struct fp_symload *j, uint64_t deadline_ns)
{
        struct timespec ts = mono_ts(deadline_ns);

        while (!j->done) {
                if (!deadline_ns)
                        pthread_cond_wait(&c->finished, &c->lock);
                else if (pthread_cond_timedwait(&c->finished, &c->lock, &ts) == ETIMEDOUT)
                        return;
        }
}

/*
 * On the requester's side, under c->lock: a done load's table into the
 * cache (one table per key, the full one over a stripped one) and *ret.
 */
static int install(struct fp_symcache *c, struct fp_symload *j, struct fp_symtab **ret)
{
        struct entry *e;
        int r;

        if (j->r == -E2BIG && !j->reported)
                fp_log(LOG_WARNING, "not reading the symbols of %s: more than %u function symbols",
                       j->paths[0], FP_SYM_MAX_SYMBOLS);
        j->reported |= j->r == -E2BIG;
        if (j->r < 0)
                return j->r;
        if (j->cached) {
                *ret = fp_symtab_ref(j->tab);
                return 0;
        }
        e = map_find(&c->by_key, j->key);
        if (j->fresh && e && !fp_sym_symtab_full(e->tab) && fp_sym_symtab_full(j->tab)) {
                /* Later lookups get the richer table; holders of the old one keep it. */
                uncharge(c, e); /* (a root file's build ID: nobody's charge) */
                fp_symtab_unref(e->tab);
                e->tab = fp_symtab_ref(j->tab);
                c->n_loaded++;
                c->by_source[fp_symtab_source(j->tab)]++;
                map_clear(&c->by_path); /* paths remembered with the old table */
        } else if (e) {
                /* Loaded meanwhile by another load of the same object. */
                fp_symtab_unref(j->tab);
                j->tab = fp_symtab_ref(e->tab);
        } else {
                /* Only a table of a file the owner's processes chose is the owner's charge. */
                bool chargeable = j->owner != 0 && strchr(j->key, '@');
                size_t bytes = chargeable ? fp_symtab_bytes(j->tab) : 0;

                evict(c);
                if (chargeable && (r = charge(c, j->owner, bytes)) < 0) {
                        if (r == -EDQUOT && !j->reported)
                                fp_log(LOG_WARNING,
                                       "not keeping the symbols of %s (%zu MiB): the tables of uid "
                                       "%u's files would pass %u MiB",
                                       j->paths[j->won], bytes >> 20, (unsigned)j->owner,
                                       (unsigned)(c->user_bytes >> 20));
                        j->reported = true;
                        return r;
                }
                e = entry_new(j->key);
                if (!e) {
                        if (chargeable)
                                charge_of(c, j->owner, false)->bytes -= bytes;
                        return -ENOMEM;
                }
                e->tab = fp_symtab_ref(j->tab);
                e->owner = j->owner;
                e->charged = bytes;
                r = map_insert(&c->by_key, e);
                if (r < 0) {
                        uncharge(c, e);
                        entry_free(e);
                        return r;
                }
                c->n_loaded++;
                c->by_source[fp_symtab_source(j->tab)]++;
                for (size_t i = 0; i < FP_SYM_INSPECTORS && fp_sym_inspectors[i]; i++) {
                        const void *f = fp_symtab_facts(j->tab, i);
                        c->runtime_files[i] += f && fp_sym_inspectors[i]->is_runtime(f);
                }
        }
        r = remember_path(c, j->paths[j->won], &j->st, j->tab);
        if (r < 0)
                return r;
        *ret = fp_symtab_ref(j->tab);
        return 0;
}

/*
 * Under c->lock: a done load, collected by one of its requesters: into
 * the cache and *ret (install()), the end of a slow read logged, and the
 * requester's reference dropped.
 */
static int collect(struct fp_symcache *c, struct fp_symload *j, struct fp_symtab **ret)
{
        int r;

        c->n_loads--;
        r = install(c, j, ret);
        if (j->slow) {
                j->slow = false;
                fp_log(LOG_INFO, "read %s in %" PRIu64 " ms (%zu MiB of tables)%s%s",
                       j->paths[j->r < 0 ? 0 : j->won], fp_symload_age_ms(j),
                       fp_symtab_bytes(j->tab) >> 20, r < 0 ? ", not kept: " : "",
                       r == -EDQUOT ? "past its owner's budget"
                       : r < 0      ? strerror(-r)
                                    : "");
        }
        load_unref_locked(j);
        return r;
}

int fp_symcache_start(struct fp_symcache *c, const char *const *paths, size_t n_paths,
                      const struct fp_file_id *want, uint32_t owner, int wait_ms,
                      struct fp_symtab **ret, struct fp_symload **ret_load)
{
        struct fp_symload *j, **tail;
        bool waited;
        int r;

        if (!c || !paths || !n_paths || n_paths > FP_SYMLOAD_MAX_PATHS || !ret)
                return -EINVAL;
        if (want && ret_load) {
                /* The file is being read already (for another mapping of it): share that load. */
                pthread_mutex_lock(&c->lock);
                j = find_load(c, want);
                if (j) {
                        j->refs++;
                        c->n_loads++;
                        *ret_load = j;
                }
                pthread_mutex_unlock(&c->lock);
                if (j)
                        return -EINPROGRESS;
        }
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        for (size_t i = 0; i < n_paths; i++) {
                j->paths[i] = strdup(paths[i]);
                if (!j->paths[i]) {
                        j->refs = 1;
                        j->n_paths = i;
                        load_unref_locked(j);
                        return -ENOMEM;
                }
        }
        j->n_paths = n_paths;
        if (want) {
                j->has_want = true;
                j->want = *want;
        }
        j->owner = owner;
        j->start_ns = fp_now_ns(CLOCK_MONOTONIC);
        j->refs = 2; /* the requester's and the queue's */

        pthread_mutex_lock(&c->lock);
        r = c->n_loads >= FP_SYMLOAD_MAX_QUEUED ? -EBUSY : start_loaders(c);
        if (r < 0) {
                j->refs = 1;
                load_unref_locked(j);
                pthread_mutex_unlock(&c->lock);
                return r;
        }
        for (tail = &c->queue; *tail; tail = &(*tail)->next)
                ;
        *tail = j;
        c->n_loads++;
        pthread_cond_signal(&c->work);
        /* Wait only when a loader is free for it: a stuck device costs one wait, not one per file.
         */
        waited = wait_ms < 0 || (wait_ms > 0 && next_runnable(c) == tail && loader_idle(c));
        if (waited)
                wait_done(c, j, wait_ms < 0 ? 0 : j->start_ns + (uint64_t)wait_ms * 1000000ULL);
        if (!j->done) {
                j->slow = true;
                pthread_mutex_unlock(&c->lock);
                if (waited) /* (waiting without end, it is done) */
                        fp_log(LOG_INFO,
                               "reading %s takes more than %d ms: reading on in the background "
                               "(its frames stay unnamed meanwhile)",
                               paths[0], wait_ms);
                else if (wait_ms > 0)
                        fp_log(LOG_INFO,
                               "%s waits for a symbol loader (another read is slow); its frames "
                               "stay unnamed meanwhile",
                               paths[0]);
                if (!ret_load) {
                        fp_symcache_cancel(c, j);
                        return -EINPROGRESS;
                }
                *ret_load = j;
                return -EINPROGRESS;
        }
        r = collect(c, j, ret);
        pthread_mutex_unlock(&c->lock);
        return r;
}

int fp_symcache_poll(struct fp_symcache *c, struct fp_symload *j, struct fp_symtab **ret)
{
        int r;

        pthread_mutex_lock(&c->lock);
        if (!j->done) {
                pthread_mutex_unlock(&c->lock);
                return -EINPROGRESS;
        }
        r = collect(c, j, ret);
        pthread_mutex_unlock(&c->lock);
        return r;
}

void fp_symcache_cancel(struct fp_symcache *c, struct fp_symload *j)
{
        if (!j)
                return;
        pthread_mutex_lock(&c->lock);
        if (j->refs == 2) {
                /* Nobody else waits for it: out of the queue if still queued, with its reference.
                 */
                for (struct fp_symload **p = &c->queue; *p; p = &(*p)->next) {
                        if (*p == j) {
                                *p = j->next;
                                j->refs--; /* the requester's is dropped below */
                                break;
                        }
                }
        }
        c->n_loads--;
        load_unref_locked(j);
        pthread_mutex_unlock(&c->lock);
}

uint64_t fp_symload_age_ms(const struct fp_symload *j)
{
        return (fp_now_ns(CLOCK_MONOTONIC) - j->start_ns) / 1000000ULL;
}

size_t fp_symcache_n_loading(struct fp_symcache *c)
{
        size_t n;

        pthread_mutex_lock(&c->lock);
        n = 0;
        for (struct fp_symload *j = c->queue; j; j = j->next)
                n++;
        for (size_t i = 0; i < FP_SYMLOAD_THREADS; i++)
                n += c->running[i] != NULL;
        pthread_mutex_unlock(&c->lock);
        return n;
}

int fp_symcache_get(struct fp_symcache *c, const char *path, const struct fp_file_id *want,
                    struct fp_symtab **ret)
{
        if (!path)
                return -EINVAL;
        return fp_symcache_start(c, &path, 1, want, 0, -1, ret, NULL);
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
