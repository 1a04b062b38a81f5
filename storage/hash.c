/* SPDX-License-Identifier: MIT */
/*
 * The store module's small in-memory tables: growing arrays, the index
 * the batch interns its entries with, and the 64-bit key map that serves
 * as the store's content-hash -> rowid cache and as the queries' lookup
 * tables. See store-internal.h for their contracts.
 */
#include <errno.h>
#include <stdlib.h>

#include "store-internal.h"
#include "util.h"

/* ---- index ---- */

int64_t fp_store_index_find(const struct fp_store_index *x, uint64_t hash, fp_store_eq_fn eq,
                            const void *ctx, const void *key)
{
        uint64_t tag = hash >> 32;
        size_t mask = x->cap - 1;

        if (!x->cap)
                return -1;
        for (size_t pos = tag & mask;; pos = (pos + 1) & mask) {
                uint64_t sl = x->slots[pos];
                if (!sl)
                        return -1;
                if ((sl >> 32) == tag && eq(ctx, (uint32_t)sl - 1, key))
                        return (uint32_t)sl - 1;
        }
}

static void index_place(uint64_t *slots, size_t cap, uint64_t slot)
{
        size_t mask = cap - 1;
        size_t pos = (slot >> 32) & mask;

        while (slots[pos])
                pos = (pos + 1) & mask;
        slots[pos] = slot;
}

int fp_store_index_add(struct fp_store_index *x, uint64_t hash, uint32_t idx)
{
        if ((x->n + 1) * 2 > x->cap) {
                size_t cap = x->cap ? x->cap * 2 : 64;
                uint64_t *slots;

                if (cap > ((size_t)1 << 33) || cap > SIZE_MAX / sizeof(*slots))
                        return -ENOMEM;
                slots = calloc(cap, sizeof(*slots));
                if (!slots)
                        return -ENOMEM;
                for (size_t i = 0; i < x->cap; i++)
                        if (x->slots[i])
                                index_place(slots, cap, x->slots[i]);
                free(x->slots);
                x->slots = slots;
                x->cap = cap;
        }
        index_place(x->slots, x->cap, (hash & 0xffffffff00000000ULL) | ((uint64_t)idx + 1));
        x->n++;
        return 0;
}

void fp_store_index_free(struct fp_store_index *x)
{
        free(x->slots);
        *x = (struct fp_store_index){0};
}

/* ---- map ---- */

static size_t map_pos(uint64_t key, size_t mask)
{
        return fp_mix64(key) & mask;
}

struct fp_store_map_entry *fp_store_map_get(const struct fp_store_map *m, uint64_t key)
{
        size_t mask = m->cap - 1;

        if (!m->cap || !key)
                return NULL;
        for (size_t pos = map_pos(key, mask);; pos = (pos + 1) & mask) {
                if (m->e[pos].key == key)
                        return &m->e[pos];
                if (!m->e[pos].key)
                        return NULL;
        }
}

static struct fp_store_map_entry *map_slot(struct fp_store_map_entry *e, size_t cap, uint64_t key)
{
        size_t mask = cap - 1;
        size_t pos = map_pos(key, mask);

        while (e[pos].key && e[pos].key != key)
                pos = (pos + 1) & mask;
        return &e[pos];
}

static int map_resize(struct fp_store_map *m, size_t cap)
{
        struct fp_store_map_entry *e;

        if (cap > SIZE_MAX / sizeof(*e))
                return -ENOMEM;
        e = calloc(cap, sizeof(*e));
        if (!e)
                return -ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
                if (m->e[i].key)
                        *map_slot(e, cap, m->e[i].key) = m->e[i];
        free(m->e);
        m->e = e;
        m->cap = cap;
        return 0;
}

int fp_store_map_put(struct fp_store_map *m, uint64_t key, uint64_t a, uint64_t b)
{
        struct fp_store_map_entry *e;

        if (!key)
                return -EINVAL;
        if ((m->n + 1) * 2 > m->cap) {
                int r = map_resize(m, m->cap ? m->cap * 2 : 64);
                if (r < 0)
                        return r;
        }
        e = map_slot(m->e, m->cap, key);
        if (!e->key)
                m->n++;
        *e = (struct fp_store_map_entry){key, a, b};
        return 0;
}

int fp_store_map_filter(struct fp_store_map *m,
                        bool (*keep)(const struct fp_store_map_entry *e, void *ud), void *ud)
{
        struct fp_store_map_entry *old = m->e;
        size_t old_cap = m->cap, n = 0;

        for (size_t i = 0; i < old_cap; i++)
                if (old[i].key && keep(&old[i], ud))
                        n++;
        m->e = NULL;
        m->cap = 0;
        m->n = 0;
        if (n) {
                size_t cap = 64;
                while (cap < n * 2)
                        cap *= 2;
                if (map_resize(m, cap) < 0) {
                        free(old);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < old_cap; i++)
                        if (old[i].key && keep(&old[i], ud)) {
                                *map_slot(m->e, m->cap, old[i].key) = old[i];
                                m->n++;
                        }
        }
        free(old);
        return 0;
}

void fp_store_map_clear(struct fp_store_map *m)
{
        fp_store_map_free(m);
}

void fp_store_map_free(struct fp_store_map *m)
{
        free(m->e);
        *m = (struct fp_store_map){0};
}
