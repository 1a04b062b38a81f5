/* SPDX-License-Identifier: MIT */
/*
 * The batch: one closed bucket as plain data, built by the agent's loop
 * thread and written by the store's writer (see store.h).
 *
 * Everything is interned as it is added: strings live once in one
 * character arena and are referred to by index; mappings, frames, stacks,
 * threads, samples and drops are deduplicated through an fp_store_index each,
 * so a repeated stack costs one hash and one comparison. The content
 * hashes that the store deduplicates by across buckets (store-internal.h)
 * are computed here, by the builder, so the writer only looks them up.
 * A batch holds no pointer to anything but its own allocations.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store-internal.h"

struct fp_store_batch *fp_store_batch_new(int64_t start_ns, int64_t length_ns)
{
        struct fp_store_batch *b = calloc(1, sizeof(*b));

        if (!b)
                return NULL;
        b->start_ns = start_ns;
        b->length_ns = length_ns;
        return b;
}

void fp_store_batch_free(struct fp_store_batch *b)
{
        if (!b)
                return;
        free(b->key);
        free(b->chars);
        free(b->strs);
        free(b->targets);
        free(b->events);
        free(b->mappings);
        free(b->frames);
        free(b->stacks);
        free(b->threads);
        free(b->samples);
        free(b->drops);
        free(b->frame_ids);
        fp_store_index_free(&b->idx_strs);
        fp_store_index_free(&b->idx_targets);
        fp_store_index_free(&b->idx_events);
        fp_store_index_free(&b->idx_mappings);
        fp_store_index_free(&b->idx_frames);
        fp_store_index_free(&b->idx_stacks);
        fp_store_index_free(&b->idx_threads);
        fp_store_index_free(&b->idx_samples);
        fp_store_index_free(&b->idx_drops);
        free(b);
}

void fp_store_batch_set_uploaded(struct fp_store_batch *b, bool uploaded)
{
        b->uploaded = uploaded;
}

void fp_store_batch_set_cost(struct fp_store_batch *b, const struct fp_store_cost *cost)
{
        b->cost = *cost;
}

int fp_store_batch_set_key(struct fp_store_batch *b, const char *key)
{
        char *k = NULL;

        if (key && (!*key || strlen(key) > FP_STORE_MAX_KEY))
                return -EINVAL;
        if (key && !(k = strdup(key)))
                return -ENOMEM;
        free(b->key);
        b->key = k;
        return 0;
}

size_t fp_store_batch_n_samples(const struct fp_store_batch *b)
{
        return b->n_samples;
}

size_t fp_store_batch_n_stacks(const struct fp_store_batch *b)
{
        return b->n_stacks;
}

size_t fp_store_batch_bytes(const struct fp_store_batch *b)
{
        return sizeof(*b) + b->cap_chars + b->cap_strs * sizeof(*b->strs) +
               b->cap_targets * sizeof(*b->targets) + b->cap_events * sizeof(*b->events) +
               b->cap_mappings * sizeof(*b->mappings) + b->cap_frames * sizeof(*b->frames) +
               b->cap_stacks * sizeof(*b->stacks) + b->cap_threads * sizeof(*b->threads) +
               b->cap_samples * sizeof(*b->samples) + b->cap_drops * sizeof(*b->drops) +
               b->cap_frame_ids * sizeof(*b->frame_ids) +
               8 * (b->idx_strs.cap + b->idx_targets.cap + b->idx_events.cap + b->idx_mappings.cap +
                    b->idx_frames.cap + b->idx_stacks.cap + b->idx_threads.cap +
                    b->idx_samples.cap + b->idx_drops.cap);
}

uint64_t fp_store_batch_target_count(const struct fp_store_batch *b, uint32_t target)
{
        uint64_t best = 0;

        /* Few events per target: one pass per event. */
        for (size_t e = 0; e < b->n_events; e++) {
                uint64_t sum = 0;
                for (size_t i = 0; i < b->n_samples; i++) {
                        const struct fp_batch_sample *sa = &b->samples[i];
                        if (sa->event == e && b->threads[sa->thread].target == target)
                                sum += sa->count;
                }
                if (sum > best)
                        best = sum;
        }
        return best;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
        uint64_t s = a + b;
        return (s < a || s > INT64_MAX) ? INT64_MAX : s;
}

/* ---- strings ---- */

struct str_key {
        const char *s;
        size_t len;
};

static bool str_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_store_batch *b = ctx;
        const struct str_key *k = key;
        return b->strs[idx].len == k->len && memcmp(b->chars + b->strs[idx].off, k->s, k->len) == 0;
}

/* Interns s (NULL: ""); *ret gets its index. */
static int intern_str(struct fp_store_batch *b, const char *s, uint32_t *ret)
{
        struct str_key k = {s ? s : "", s ? strlen(s) : 0};
        uint64_t h = fp_store_hash_str(k.s, k.len);
        int64_t i = fp_store_index_find(&b->idx_strs, h, str_eq, b, &k);
        int r;

        if (i >= 0) {
                *ret = (uint32_t)i;
                return 0;
        }
        if (k.len >= UINT32_MAX || b->n_chars + k.len + 1 > UINT32_MAX ||
            b->n_strs >= UINT32_MAX - 1)
                return -E2BIG;
        r = fp_grow((void **)&b->chars, &b->cap_chars, b->n_chars + k.len + 1, 1);
        if (r < 0)
                return r;
        r = fp_grow((void **)&b->strs, &b->cap_strs, b->n_strs + 1, sizeof(*b->strs));
        if (r < 0)
                return r;
        r = fp_store_index_add(&b->idx_strs, h, (uint32_t)b->n_strs);
        if (r < 0)
                return r;
        memcpy(b->chars + b->n_chars, k.s, k.len);
        b->chars[b->n_chars + k.len] = '\0';
        b->strs[b->n_strs] = (struct fp_batch_string){(uint32_t)b->n_chars, (uint32_t)k.len, h};
        b->n_chars += k.len + 1;
        *ret = (uint32_t)b->n_strs++;
        return 0;
}

/*
 * The generic tail of every add function: finds key in table (an array of
 * elem-byte entries whose hash is at hash_off) or appends *entry. Sets
 * *ret_idx and *ret_new.
 */
static int intern(struct fp_store_batch *b, void **table, size_t *n, size_t *cap,
                  struct fp_store_index *x, size_t elem, const void *entry, uint64_t hash,
                  fp_store_eq_fn eq, uint32_t *ret_idx, bool *ret_new)
{
        int64_t i = fp_store_index_find(x, hash, eq, b, entry);
        int r;

        if (i >= 0) {
                *ret_idx = (uint32_t)i;
                *ret_new = false;
                return 0;
        }
        if (*n >= UINT32_MAX - 1)
                return -E2BIG;
        r = fp_grow(table, cap, *n + 1, elem);
        if (r < 0)
                return r;
        r = fp_store_index_add(x, hash, (uint32_t)*n);
        if (r < 0)
                return r;
        memcpy((char *)*table + *n * elem, entry, elem);
        *ret_idx = (uint32_t)(*n)++;
        *ret_new = true;
        return 0;
}

#define INTERN(b, name, entry, eq, ret_idx, ret_new)                                               \
        intern((b), (void **)&(b)->name, &(b)->n_##name, &(b)->cap_##name, &(b)->idx_##name,       \
               sizeof(*(b)->name), (entry), (entry)->hash, (eq), (ret_idx), (ret_new))

/* ---- targets ---- */

static bool target_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_batch_target *a = &((const struct fp_store_batch *)ctx)->targets[idx],
                                     *k = key;
        return a->host == k->host && a->pid == k->pid && a->starttime == k->starttime;
}

int fp_store_batch_add_target(struct fp_store_batch *b, const struct fp_store_target *t,
                              uint32_t *ret_idx)
{
        struct fp_batch_target e = {.pid = t->pid,
                                    .starttime = t->starttime,
                                    .active = t->active,
                                    .guard = t->has_guard ? (int64_t)t->guard : -1};
        char hostname[256];
        const char *host = t->host;
        uint32_t idx;
        bool is_new;
        int r;

        if (t->pid < 0) /* 0: a host-tier series of many processes */
                return -EINVAL;
        if (!host) {
                if (gethostname(hostname, sizeof(hostname)) < 0)
                        return -errno;
                hostname[sizeof(hostname) - 1] = '\0';
                host = hostname;
        }
        if ((r = intern_str(b, host, &e.host)) < 0 || (r = intern_str(b, t->comm, &e.comm)) < 0 ||
            (r = intern_str(b, t->exe, &e.exe)) < 0 ||
            (r = intern_str(b, t->config, &e.config)) < 0 ||
            (r = intern_str(b, t->service, &e.service)) < 0 ||
            (r = intern_str(b, t->container, &e.container)) < 0)
                return r;
        e.hash = fp_store_hash_step(
            fp_store_hash_step(fp_store_hash_step(FP_STORE_SEED_OTHER, e.host), (uint64_t)e.pid),
            e.starttime);
        r = INTERN(b, targets, &e, target_eq, &idx, &is_new);
        if (r < 0)
                return r;
        if (!is_new) { /* the newest description wins */
                e.series_event = b->targets[idx].series_event;
                b->targets[idx] = e;
        }
        *ret_idx = idx;
        return 0;
}

/* ---- events ---- */

static bool event_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_batch_event *a = &((const struct fp_store_batch *)ctx)->events[idx],
                                    *k = key;
        return a->name == k->name && a->count_type == k->count_type &&
               a->count_unit == k->count_unit && a->value_type == k->value_type &&
               a->value_unit == k->value_unit && a->period_type == k->period_type &&
               a->period_unit == k->period_unit && a->period == k->period;
}

int fp_store_batch_add_event(struct fp_store_batch *b, const struct fp_store_event *ev,
                             uint32_t *ret_idx)
{
        struct fp_batch_event e = {.period_type = FP_BATCH_NONE, .period_unit = FP_BATCH_NONE};
        bool is_new;
        int r;

        if (!ev->name || !*ev->name || !ev->count_type || !ev->count_unit || !ev->value_type ||
            !ev->value_unit)
                return -EINVAL;
        if ((r = intern_str(b, ev->name, &e.name)) < 0 ||
            (r = intern_str(b, ev->count_type, &e.count_type)) < 0 ||
            (r = intern_str(b, ev->count_unit, &e.count_unit)) < 0 ||
            (r = intern_str(b, ev->value_type, &e.value_type)) < 0 ||
            (r = intern_str(b, ev->value_unit, &e.value_unit)) < 0)
                return r;
        if (ev->period_type) {
                if ((r = intern_str(b, ev->period_type, &e.period_type)) < 0 ||
                    (r = intern_str(b, ev->period_unit, &e.period_unit)) < 0)
                        return r;
                e.period = ev->period;
        }
        e.hash = FP_STORE_SEED_OTHER;
        e.hash = fp_store_hash_step(e.hash, e.name);
        e.hash = fp_store_hash_step(e.hash, e.value_type);
        e.hash = fp_store_hash_step(e.hash, (uint64_t)e.period);
        return INTERN(b, events, &e, event_eq, ret_idx, &is_new);
}

/* ---- stacks ---- */

static bool mapping_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_batch_mapping *a = &((const struct fp_store_batch *)ctx)->mappings[idx];
        const struct fp_batch_mapping *k = key;
        return a->hash == k->hash && a->file == k->file && a->build_id == k->build_id &&
               a->start == k->start && a->limit == k->limit && a->offset == k->offset;
}

static bool frame_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_batch_frame *a = &((const struct fp_store_batch *)ctx)->frames[idx],
                                    *k = key;
        return a->hash == k->hash && a->mapping == k->mapping && a->function == k->function &&
               a->system_name == k->system_name && a->filename == k->filename &&
               a->line == k->line && a->address == k->address;
}

/* A frame as given, for looking it up before anything is interned. */
struct frame_key {
        uint32_t mapping;
        const char *name, *system_name, *filename;
        size_t name_len, system_name_len, filename_len;
        int64_t line;
        uint64_t address;
        uint64_t hash;
};

/* Whether string i (FP_BATCH_NONE: "") is s of len bytes. */
static bool str_is(const struct fp_store_batch *b, uint32_t i, const char *s, size_t len)
{
        if (i == FP_BATCH_NONE)
                return len == 0;
        return b->strs[i].len == len && memcmp(b->chars + b->strs[i].off, s, len) == 0;
}

static bool frame_key_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_store_batch *b = ctx;
        const struct fp_batch_frame *a = &b->frames[idx];
        const struct frame_key *k = key;

        return a->hash == k->hash && a->mapping == k->mapping && a->address == k->address &&
               a->line == k->line && str_is(b, a->function, k->name, k->name_len) &&
               str_is(b, a->system_name, k->system_name, k->system_name_len) &&
               str_is(b, a->filename, k->filename, k->filename_len);
}

static bool opt_str_is(const struct fp_store_batch *b, uint32_t i, const char *s)
{
        return strcmp(b->chars + b->strs[i].off, s ? s : "") == 0;
}

/*
 * The mapping of f: most frames of a batch fall in a few mappings, so a
 * small cache of recent ones (compared by content) saves interning its
 * two strings for every frame.
 */
static int frame_mapping(struct fp_store_batch *b, const struct fp_store_frame *f, uint32_t *ret)
{
        size_t slot = ((f->mapping_start ^ f->mapping_limit) >> 12) % FP_BATCH_RECENT;
        uint32_t m = b->recent_mappings[slot];
        struct fp_batch_mapping e = {
            .start = f->mapping_start,
            .limit = f->mapping_limit,
            .offset = f->mapping_offset,
            .vaddr1 = f->mapping_vaddr1,
        };
        uint64_t h;
        bool is_new;
        int r;

        if (m) {
                struct fp_batch_mapping *c = &b->mappings[m - 1];
                if (c->start == e.start && c->limit == e.limit && c->offset == e.offset &&
                    opt_str_is(b, c->file, f->mapping_file) &&
                    opt_str_is(b, c->build_id, f->build_id)) {
                        if (!c->vaddr1)
                                c->vaddr1 = e.vaddr1;
                        *ret = m - 1;
                        return 0;
                }
        }
        if ((r = intern_str(b, f->mapping_file, &e.file)) < 0 ||
            (r = intern_str(b, f->build_id, &e.build_id)) < 0)
                return r;
        h = fp_store_hash_step(FP_STORE_SEED_MAPPING, b->strs[e.file].hash);
        h = fp_store_hash_step(h, b->strs[e.build_id].hash);
        h = fp_store_hash_step(h, e.start);
        h = fp_store_hash_step(h, e.limit);
        e.hash = fp_store_hash_nonzero(fp_store_hash_step(h, e.offset));
        r = INTERN(b, mappings, &e, mapping_eq, ret, &is_new);
        if (r < 0)
                return r;
        if (!b->mappings[*ret].vaddr1)
                b->mappings[*ret].vaddr1 = e.vaddr1;
        b->recent_mappings[slot] = *ret + 1;
        return 0;
}

/*
 * A function's content hash: its name's, then its system name's and file's
 * where it has them (a function with only a name hashes as it always did).
 */
static uint64_t function_hash(const struct frame_key *k)
{
        uint64_t h =
            fp_store_hash_step(FP_STORE_SEED_FUNCTION, fp_store_hash_str(k->name, k->name_len));

        if (k->system_name_len)
                h = fp_store_hash_step(h,
                                       fp_store_hash_str(k->system_name, k->system_name_len) ^ 1);
        if (k->filename_len)
                h = fp_store_hash_step(h, fp_store_hash_str(k->filename, k->filename_len) ^ 2);
        return fp_store_hash_nonzero(h);
}

static int add_frame(struct fp_store_batch *b, const struct fp_store_frame *f, uint32_t *ret_idx)
{
        struct frame_key k = {.mapping = FP_BATCH_NONE, .name = f->function, .address = f->address};
        struct fp_batch_frame e = {.address = f->address};
        uint64_t mapping_hash = 0;
        int64_t found;
        bool is_new;
        int r;

        if (f->mapping_file && *f->mapping_file) {
                r = frame_mapping(b, f, &k.mapping);
                if (r < 0)
                        return r;
                mapping_hash = b->mappings[k.mapping].hash;
        }
        if (k.name && *k.name) {
                k.name_len = strlen(k.name);
                /* A system name equal to the name says nothing more. */
                if (f->system_name && *f->system_name && strcmp(f->system_name, k.name) != 0) {
                        k.system_name = f->system_name;
                        k.system_name_len = strlen(k.system_name);
                }
                if (f->filename && *f->filename) {
                        k.filename = f->filename;
                        k.filename_len = strlen(k.filename);
                }
                k.line = f->line > 0 ? f->line : 0;
                e.function_hash = function_hash(&k);
        }
        k.hash = fp_store_hash_step(
            fp_store_hash_step(fp_store_hash_step(FP_STORE_SEED_FRAME, mapping_hash),
                               e.function_hash),
            e.address);
        if (k.line)
                k.hash = fp_store_hash_step(k.hash, (uint64_t)k.line);
        k.hash = fp_store_hash_nonzero(k.hash);
        /* Seen in this batch already: nothing to intern. */
        found = fp_store_index_find(&b->idx_frames, k.hash, frame_key_eq, b, &k);
        if (found >= 0) {
                *ret_idx = (uint32_t)found;
                return 0;
        }
        e.mapping = k.mapping;
        e.function = e.system_name = e.filename = FP_BATCH_NONE;
        e.line = k.line;
        if (k.name_len && (r = intern_str(b, k.name, &e.function)) < 0)
                return r;
        if (k.system_name_len && (r = intern_str(b, k.system_name, &e.system_name)) < 0)
                return r;
        if (k.filename_len && (r = intern_str(b, k.filename, &e.filename)) < 0)
                return r;
        e.hash = k.hash;
        return INTERN(b, frames, &e, frame_eq, ret_idx, &is_new);
}

struct stack_key {
        const uint32_t *ids;
        uint32_t n;
        uint64_t hash;
};

static bool stack_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_store_batch *b = ctx;
        const struct fp_batch_stack *a = &b->stacks[idx];
        const struct stack_key *k = key;
        return a->hash == k->hash && a->n == k->n &&
               (!k->n || memcmp(b->frame_ids + a->off, k->ids, k->n * sizeof(*k->ids)) == 0);
}

int fp_store_batch_add_frame(struct fp_store_batch *b, const struct fp_store_frame *f,
                             uint32_t *ret_idx)
{
        if (!f)
                return -EINVAL;
        return add_frame(b, f, ret_idx);
}

/* The stack whose frame indices sit at frame_ids[off, off + n): found, or kept as new. */
static int add_stack_at(struct fp_store_batch *b, size_t off, size_t n, uint32_t *ret_idx)
{
        uint64_t h = fp_store_hash_step(FP_STORE_SEED_STACK, n);
        struct stack_key k;
        int64_t found;
        int r;

        for (size_t i = 0; i < n; i++)
                h = fp_store_hash_step(h, b->frames[b->frame_ids[off + i]].hash);
        /* An empty stack may come first, before any frame id was kept. */
        k = (struct stack_key){n ? b->frame_ids + off : NULL, (uint32_t)n,
                               fp_store_hash_nonzero(h)};
        found = fp_store_index_find(&b->idx_stacks, k.hash, stack_eq, b, &k);
        if (found >= 0) {
                *ret_idx = (uint32_t)found;
                return 0;
        }
        r = fp_grow((void **)&b->stacks, &b->cap_stacks, b->n_stacks + 1, sizeof(*b->stacks));
        if (r < 0)
                return r;
        r = fp_store_index_add(&b->idx_stacks, k.hash, (uint32_t)b->n_stacks);
        if (r < 0)
                return r;
        b->stacks[b->n_stacks] = (struct fp_batch_stack){(uint32_t)off, (uint32_t)n, k.hash};
        b->n_frame_ids += n;
        *ret_idx = (uint32_t)b->n_stacks++;
        return 0;
}

/* Room for n more frame indices at the end of frame_ids; their offset, or -errno. */
static int64_t frame_room(struct fp_store_batch *b, size_t n)
{
        size_t off = b->n_frame_ids;

        if (n > FP_STORE_MAX_FRAMES)
                return -EINVAL;
        if (b->n_stacks >= UINT32_MAX - 1 || off + n > UINT32_MAX)
                return -E2BIG;
        /* The frames go to the end of frame_ids; they stay only if the stack is new. */
        int r = fp_grow((void **)&b->frame_ids, &b->cap_frame_ids, off + n, sizeof(uint32_t));
        return r < 0 ? r : (int64_t)off;
}

int fp_store_batch_add_stack(struct fp_store_batch *b, const struct fp_store_frame *frames,
                             size_t n, uint32_t *ret_idx)
{
        int64_t off;
        int r;

        if (n && !frames)
                return -EINVAL;
        if ((off = frame_room(b, n)) < 0)
                return (int)off;
        for (size_t i = 0; i < n; i++) {
                uint32_t fi;
                r = add_frame(b, &frames[i], &fi);
                if (r < 0)
                        return r;
                b->frame_ids[off + (int64_t)i] = fi;
        }
        return add_stack_at(b, (size_t)off, n, ret_idx);
}

int fp_store_batch_add_stack_of(struct fp_store_batch *b, const uint32_t *frame_idx, size_t n,
                                uint32_t *ret_idx)
{
        int64_t off;

        if (n && !frame_idx)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (frame_idx[i] >= b->n_frames)
                        return -EINVAL;
        if ((off = frame_room(b, n)) < 0)
                return (int)off;
        if (n)
                memcpy(b->frame_ids + off, frame_idx, n * sizeof(*frame_idx));
        return add_stack_at(b, (size_t)off, n, ret_idx);
}

int fp_store_batch_set_series(struct fp_store_batch *b, uint32_t target, uint32_t event)
{
        if (target >= b->n_targets || event >= b->n_events)
                return -EINVAL;
        b->targets[target].series_event = event + 1;
        return 0;
}

/* ---- samples and drops ---- */

static bool thread_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_batch_thread *a = &((const struct fp_store_batch *)ctx)->threads[idx],
                                     *k = key;
        return a->target == k->target && a->tid == k->tid && a->name == k->name &&
               a->wait == k->wait;
}

static bool sample_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_batch_sample *a = &((const struct fp_store_batch *)ctx)->samples[idx],
                                     *k = key;
        return a->thread == k->thread && a->event == k->event && a->stack == k->stack;
}

bool fp_store_wait_valid(const char *wait)
{
        static const char *const waits[] = FP_STORE_WAITS;

        for (size_t i = 0; wait && i < sizeof(waits) / sizeof(waits[0]); i++)
                if (strcmp(wait, waits[i]) == 0)
                        return true;
        return false;
}

int fp_store_batch_add_sample(struct fp_store_batch *b, uint32_t target, uint32_t event, pid_t tid,
                              const char *thread_name, uint32_t stack, uint64_t count,
                              uint64_t value)
{
        return fp_store_batch_add_waiting(b, target, event, tid, thread_name, NULL, stack, count,
                                          value);
}

int fp_store_batch_add_waiting(struct fp_store_batch *b, uint32_t target, uint32_t event, pid_t tid,
                               const char *thread_name, const char *wait, uint32_t stack,
                               uint64_t count, uint64_t value)
{
        struct fp_batch_thread th = {.target = target, .tid = tid};
        struct fp_batch_sample sa = {.event = event, .stack = stack};
        uint32_t idx;
        bool is_new;
        int r;

        if (target >= b->n_targets || event >= b->n_events || stack >= b->n_stacks)
                return -EINVAL;
        if (wait && wait[0] && !fp_store_wait_valid(wait))
                return -EINVAL;
        r = intern_str(b, thread_name, &th.name);
        if (r == 0)
                r = intern_str(b, wait, &th.wait);
        if (r < 0)
                return r;
        th.hash = fp_store_hash_step(
            fp_store_hash_step(
                fp_store_hash_step(fp_store_hash_step(FP_STORE_SEED_OTHER, target), (uint64_t)tid),
                th.name),
            th.wait);
        r = INTERN(b, threads, &th, thread_eq, &sa.thread, &is_new);
        if (r < 0)
                return r;
        sa.hash = fp_store_hash_step(
            fp_store_hash_step(fp_store_hash_step(FP_STORE_SEED_OTHER, sa.thread), event), stack);
        r = INTERN(b, samples, &sa, sample_eq, &idx, &is_new);
        if (r < 0)
                return r;
        b->samples[idx].count = sat_add(b->samples[idx].count, count);
        b->samples[idx].value = sat_add(b->samples[idx].value, value);
        return 0;
}

static bool drop_eq(const void *ctx, uint32_t idx, const void *key)
{
        const struct fp_batch_drop *a = &((const struct fp_store_batch *)ctx)->drops[idx], *k = key;
        return a->target == k->target && a->reason == k->reason;
}

int fp_store_batch_add_drop(struct fp_store_batch *b, uint32_t target, const char *reason,
                            uint64_t count)
{
        struct fp_batch_drop d = {.target = target};
        uint32_t idx;
        bool is_new;
        int r;

        if (target >= b->n_targets || !reason || !*reason)
                return -EINVAL;
        r = intern_str(b, reason, &d.reason);
        if (r < 0)
                return r;
        d.hash = fp_store_hash_step(fp_store_hash_step(FP_STORE_SEED_OTHER, target), d.reason);
        r = INTERN(b, drops, &d, drop_eq, &idx, &is_new);
        if (r < 0)
                return r;
        b->drops[idx].count = sat_add(b->drops[idx].count, count);
        return 0;
}
