/* SPDX-License-Identifier: MIT */
/*
 * Demangling through libiberty's callback interfaces, which write the
 * answer piece by piece: the pieces go into a bounded buffer, so that an
 * answer past its bound is dropped without allocating it. See demangle.h.
 */
#include "demangle.h"
#include "util.h"

#include <libiberty/demangle.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The answer being written: pieces past size are counted, not kept. */
struct out {
        char *buf;
        size_t size, len;
        bool over;
};

static void put(const char *s, size_t n, void *opaque)
{
        struct out *o = opaque;

        if (o->over || n >= o->size - o->len) {
                o->over = true;
                return;
        }
        memcpy(o->buf + o->len, s, n);
        o->len += n;
        o->buf[o->len] = '\0';
}

/*
 * Rust's legacy mangling is Itanium's with a last path element "h" and 16
 * hex digits: libiberty's Rust demangler reads it (and drops the hash).
 */
static bool rust_legacy(const char *s, size_t n)
{
        if (n < 24 || strncmp(s, "_ZN", 3) != 0 || s[n - 1] != 'E')
                return false;
        const char *h = s + n - 1 - 17;
        if (h[-2] != '1' || h[-1] != '7' || h[0] != 'h')
                return false;
        for (int i = 1; i <= 16; i++)
                if (!strchr("0123456789abcdef", h[i]))
                        return false;
        return true;
}

int fp_demangle_into(const char *name, char *buf, size_t size)
{
        char sym[FP_DEMANGLE_MAX_IN + 1];
        const char *suffix = "";
        size_t n;
        int ok;

        if (!name || size < 2 || (strncmp(name, "_Z", 2) != 0 && strncmp(name, "_R", 2) != 0))
                return 0;
        n = strnlen(name, FP_DEMANGLE_MAX_IN + 1);
        if (n > FP_DEMANGLE_MAX_IN)
                return 0;
        /* A PLT stub's name (plt.c) is the symbol's and "@plt". */
        const char *at = strchr(name, '@');
        if (at) {
                suffix = at;
                n = (size_t)(at - name);
        }
        memcpy(sym, name, n);
        sym[n] = '\0';
        struct out o = {buf, size, 0, false};
        buf[0] = '\0';
        if (sym[1] == 'R' || rust_legacy(sym, n))
                ok = rust_demangle_callback(sym, DMGL_PARAMS | DMGL_ANSI, put, &o);
        else
                ok = cplus_demangle_v3_callback(sym, DMGL_PARAMS | DMGL_ANSI, put, &o);
        if (!ok || o.over || o.len == 0)
                return 0;
        put(suffix, strlen(suffix), &o);
        return !o.over;
}

/* ---- the cache: open addressing by the name's hash ---- */

struct entry {
        uint64_t hash;   /* 0: empty slot */
        char *name;      /* as given */
        char *demangled; /* NULL: not a mangled name, or not demangled */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *table;
static size_t cap, used, bytes;

static void empty_locked(void)
{
        for (size_t i = 0; i < cap; i++) {
                free(table[i].name);
                free(table[i].demangled);
        }
        free(table);
        table = NULL;
        cap = used = bytes = 0;
}

static uint64_t hash_of(const char *s)
{
        uint64_t h = fp_fnv1a(FP_FNV1A_SEED, s, strlen(s));
        return h ? h : 1;
}

/* The slot of name (hash h): its entry, or the empty slot it would take. */
static struct entry *slot_of(struct entry *t, size_t c, uint64_t h, const char *name)
{
        for (size_t i = h & (c - 1);; i = (i + 1) & (c - 1))
                if (!t[i].hash || (t[i].hash == h && strcmp(t[i].name, name) == 0))
                        return &t[i];
}

static int grow_locked(void)
{
        size_t c = cap ? cap * 2 : 1024;
        struct entry *t = calloc(c, sizeof(*t));

        if (!t)
                return -1;
        for (size_t i = 0; i < cap; i++)
                if (table[i].hash)
                        *slot_of(t, c, table[i].hash, table[i].name) = table[i];
        free(table);
        table = t;
        cap = c;
        return 0;
}

const char *fp_demangle(const char *name)
{
        static char buf[FP_DEMANGLE_MAX_OUT]; /* under the lock */
        const char *ret = NULL;
        struct entry *e;
        uint64_t h;

        if (!name || (strncmp(name, "_Z", 2) != 0 && strncmp(name, "_R", 2) != 0))
                return NULL;
        h = hash_of(name);
        pthread_mutex_lock(&lock);
        if (cap) {
                e = slot_of(table, cap, h, name);
                if (e->hash) {
                        ret = e->demangled;
                        goto out;
                }
        }
        if ((used + 1) * 4 > cap * 3 && grow_locked() < 0)
                goto out;
        e = slot_of(table, cap, h, name);
        char *copy = strdup(name), *dm = NULL;
        if (fp_demangle_into(name, buf, sizeof(buf)) && !(dm = strdup(buf))) {
                free(copy);
                goto out;
        }
        if (!copy) {
                free(dm);
                goto out;
        }
        *e = (struct entry){h, copy, dm};
        used++;
        bytes += strlen(copy) + 1 + (dm ? strlen(dm) + 1 : 0) + sizeof(*e);
        ret = dm;
out:
        pthread_mutex_unlock(&lock);
        return ret;
}

int fp_demangle_trim(void)
{
        int r = 0;

        pthread_mutex_lock(&lock);
        if (used > FP_DEMANGLE_CACHE || bytes > FP_DEMANGLE_CACHE_BYTES) {
                empty_locked();
                r = 1;
        }
        pthread_mutex_unlock(&lock);
        return r;
}

void fp_demangle_reset(void)
{
        pthread_mutex_lock(&lock);
        empty_locked();
        pthread_mutex_unlock(&lock);
}

size_t fp_demangle_cached(void)
{
        size_t n;

        pthread_mutex_lock(&lock);
        n = used;
        pthread_mutex_unlock(&lock);
        return n;
}
