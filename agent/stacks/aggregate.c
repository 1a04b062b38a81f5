/* SPDX-License-Identifier: MIT */
/*
 * Aggregation of samples into (tid, epoch, stack) entries; see aggregate.h.
 *
 * Entries live in an insertion-ordered array of pointers; an open-addressing
 * table of indices (linear probing, load factor at most 1/2) finds them by
 * hash. Nothing is ever removed, so no tombstones are needed.
 */
#include "aggregate.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct fp_agg {
        struct fp_agg_entry **entries;
        size_t n, cap;
        uint32_t *slots; /* index + 1 into entries; 0 = empty */
        size_t n_slots;  /* a power of two */
        uint64_t total_count;
        unsigned n_counters;
        size_t max_entries; /* 0: no limit */
};

static uint64_t mix(uint64_t h, uint64_t v)
{
        h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
        return h * 0xff51afd7ed558ccdULL;
}

static uint64_t key_hash(pid_t tid, unsigned epoch, const struct fp_frame *f, uint32_t n)
{
        uint64_t h = mix(0x84222325cbf29ce4ULL, ((uint64_t)(uint32_t)tid << 32) | epoch);
        for (uint32_t i = 0; i < n; i++)
                h = mix(h, f[i].addr ^ ((uint64_t)f[i].flags << 60));
        return h ^ (h >> 29);
}

static bool key_equal(const struct fp_agg_entry *e, uint64_t hash, pid_t tid, unsigned epoch,
                      const struct fp_frame *f, uint32_t n)
{
        if (e->hash != hash || e->tid != tid || e->epoch != epoch || e->n_frames != n)
                return false;
        for (uint32_t i = 0; i < n; i++)
                if (e->frames[i].addr != f[i].addr || e->frames[i].flags != f[i].flags)
                        return false;
        return true;
}

struct fp_agg *fp_agg_new(unsigned n_counters)
{
        struct fp_agg *a;

        if (n_counters > 64)
                return NULL;
        a = calloc(1, sizeof(struct fp_agg));
        if (a)
                a->n_counters = n_counters;
        return a;
}

void fp_agg_set_limit(struct fp_agg *a, size_t max_entries)
{
        a->max_entries = max_entries;
}

unsigned fp_agg_n_counters(const struct fp_agg *a)
{
        return a->n_counters;
}

static void add_counters(struct fp_agg *a, struct fp_agg_entry *e, const uint64_t *counters)
{
        for (unsigned i = 0; counters && i < a->n_counters; i++)
                e->counters[i] = counters[i] > UINT64_MAX - e->counters[i]
                                     ? UINT64_MAX
                                     : e->counters[i] + counters[i];
}

void fp_agg_free(struct fp_agg *a)
{
        if (!a)
                return;
        for (size_t i = 0; i < a->n; i++)
                free(a->entries[i]);
        free(a->entries);
        free(a->slots);
        free(a);
}

static int rehash(struct fp_agg *a, size_t n_slots)
{
        uint32_t *slots = calloc(n_slots, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        for (size_t i = 0; i < a->n; i++) {
                size_t s = a->entries[i]->hash & (n_slots - 1);
                while (slots[s])
                        s = (s + 1) & (n_slots - 1);
                slots[s] = (uint32_t)i + 1;
        }
        free(a->slots);
        a->slots = slots;
        a->n_slots = n_slots;
        return 0;
}

int fp_agg_add(struct fp_agg *a, pid_t tid, unsigned epoch, const struct fp_frame *frames,
               uint32_t n, uint64_t value, const uint64_t *counters, fp_agg_resolve_fn resolve,
               void *userdata)
{
        uint64_t h = key_hash(tid, epoch, frames, n);
        size_t s;

        if (a->n_slots) {
                for (s = h & (a->n_slots - 1); a->slots[s]; s = (s + 1) & (a->n_slots - 1)) {
                        struct fp_agg_entry *e = a->entries[a->slots[s] - 1];
                        if (key_equal(e, h, tid, epoch, frames, n)) {
                                e->count++;
                                e->value += value;
                                add_counters(a, e, counters);
                                a->total_count++;
                                return 0;
                        }
                }
        }

        /* New entry: make room first so that failure leaves the table unchanged. */
        if (a->max_entries && a->n >= a->max_entries &&
            !(n == 1 && frames[0].flags == FP_FRAME_OVERFLOW)) /* the stand-in always gets in */
                return -ENOSPC;
        if ((a->n + 1) * 2 > a->n_slots) {
                if (a->n >= UINT32_MAX / 4)
                        return -ENOMEM;
                int r = rehash(a, a->n_slots ? a->n_slots * 2 : 256);
                if (r < 0)
                        return r;
        }
        if (a->n == a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 128;
                void *p = realloc(a->entries, cap * sizeof(*a->entries));
                if (!p)
                        return -ENOMEM;
                a->entries = p;
                a->cap = cap;
        }
        /* n <= UINT32_MAX frames of 16 bytes and at most 64 counters: no overflow in size_t. */
        struct fp_agg_entry *e = malloc(sizeof(*e) + (size_t)n * sizeof(e->frames[0]) +
                                        (size_t)a->n_counters * sizeof(uint64_t));
        if (!e)
                return -ENOMEM;
        e->counters = (uint64_t *)(void *)&e->frames[n];
        memset(e->counters, 0, (size_t)a->n_counters * sizeof(uint64_t));
        e->hash = h;
        e->tid = tid;
        e->epoch = epoch;
        e->n_frames = n;
        e->count = 1;
        e->value = value;
        add_counters(a, e, counters);
        memcpy(e->frames, frames, (size_t)n * sizeof(frames[0]));
        for (uint32_t i = 0; i < n; i++)
                e->frames[i].mapping = 0;
        if (resolve)
                resolve(userdata, e->frames, n);
        a->entries[a->n++] = e;
        for (s = h & (a->n_slots - 1); a->slots[s]; s = (s + 1) & (a->n_slots - 1))
                ;
        a->slots[s] = (uint32_t)a->n;
        a->total_count++;
        return 0;
}

size_t fp_agg_n_entries(const struct fp_agg *a)
{
        return a->n;
}

const struct fp_agg_entry *fp_agg_entry(const struct fp_agg *a, size_t i)
{
        return i < a->n ? a->entries[i] : NULL;
}

uint64_t fp_agg_total_count(const struct fp_agg *a)
{
        return a->total_count;
}
