/* SPDX-License-Identifier: MIT */
/*
 * Writing to the store: a batch becomes one bucket in one transaction,
 * with room made for it first and the budget kept after it (ring.c does
 * both). The schema and the eviction rule are described in schema.c.
 *
 * Speed. The writer looks content up by the hashes the batch computed,
 * first in the store's in-memory caches (content hash -> rowid, and for
 * stacks the last bucket that used them), then in the tables' hash
 * indices; only a stack never seen before costs its frames' lookups and
 * inserts. A series' samples are one encoded insert. A stack's
 * last_bucket is what lets eviction find unreferenced stacks through an
 * index instead of decoding the samples; keeping it exact would cost an
 * UPDATE per stack per bucket, so it may lag by FP_STORE_TOUCH_SLACK
 * buckets (a stack is touched when its stored value is older than that),
 * and eviction keeps stacks up to that many buckets older than the oldest
 * surviving bucket.
 *
 * Failure. Any error rolls the transaction back and empties the caches
 * (they may name rows the rollback took away); the store stays usable.
 * After -ENOSPC the budget in force is lowered below the present size and
 * the store evicts, so that the next write has room.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store-internal.h"
#include "util.h"

/* Per-write state: the rowid of each batch entry, 0 when not resolved yet. */
struct writer {
        struct fp_store *s;
        const struct fp_store_batch *b;
        int64_t bucket;
        int64_t *target_ids, *event_ids, *thread_ids, *stack_ids, *frame_ids, *mapping_ids;
        uint8_t *blob;
        size_t blob_cap;
};

static int cache_put(struct fp_store_map *m, uint64_t key, uint64_t a, uint64_t b)
{
        if (m->n >= FP_STORE_CACHE_MAX)
                fp_store_map_clear(m);
        /* A cache that cannot grow is only slower: ignore -ENOMEM. */
        (void)fp_store_map_put(m, key, a, b);
        return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *t)
{
        sqlite3_bind_text(st, i, t ? t : "", -1, SQLITE_STATIC);
}

static size_t varint_put(uint8_t *p, uint64_t v)
{
        size_t n = 0;

        do {
                p[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
                v >>= 7;
        } while (v);
        return n;
}

/* Learns from one write: a quick rise, a slow decay. */
static void learn(uint64_t *est, uint64_t seen)
{
        *est = seen > *est - *est / 4 ? seen : *est - *est / 4;
}

/* ---- writing a batch ---- */

static int upsert_id(struct fp_store *s, sqlite3_stmt *st, int64_t *ret, const char *what)
{
        int rc = fp_store_db_step_int(st, ret);

        CHECK_RC(s, rc, what);
        if (!*ret)
                return fp_store_db_failf(s, -EIO, "Failed to %s in '%s': no row id", what, s->path);
        return 0;
}

/*
 * A cost over a range of its own (an upload's: the agent's round) goes to
 * host_costs, where the uploads of one round, which all carry it, meet in
 * one row.
 */
static int write_cost(struct fp_store *s, const struct fp_store_batch *b, int64_t host)
{
        const struct fp_store_cost *c = &b->cost;
        sqlite3_stmt *st = NULL;
        int r;

        if (!c->host_cpus || c->to_ns <= c->from_ns)
                return 0;
        r = fp_store_prepare(s,
                             "INSERT INTO host_costs (host_id, from_ns, to_ns, agent_cpu_ns,"
                             " agent_rss, host_cpus) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                             " ON CONFLICT (host_id, from_ns, to_ns) DO UPDATE SET"
                             " agent_cpu_ns = max(agent_cpu_ns, excluded.agent_cpu_ns),"
                             " agent_rss = max(agent_rss, excluded.agent_rss),"
                             " host_cpus = max(host_cpus, excluded.host_cpus)",
                             &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, host);
        sqlite3_bind_int64(st, 2, c->from_ns);
        sqlite3_bind_int64(st, 3, c->to_ns);
        sqlite3_bind_int64(st, 4, (int64_t)(c->agent_cpu_ns & INT64_MAX));
        sqlite3_bind_int64(st, 5, (int64_t)(c->agent_rss_bytes & INT64_MAX));
        sqlite3_bind_int64(st, 6, c->host_cpus);
        int rc = fp_store_db_step_done(st);
        sqlite3_finalize(st);
        CHECK_RC(s, rc, "store the agent's cost");
        return 0;
}

/*
 * Target t of batch b and its host, seen from first_ns to last_ns and
 * kept by the ring at least until bucket: ids into host and id.
 */
static int write_target(struct fp_store *s, const struct fp_store_batch *b,
                        const struct fp_batch_target *t, int64_t first_ns, int64_t last_ns,
                        int64_t bucket, int64_t *host, int64_t *id)
{
        sqlite3_stmt *st = ST(s, FP_STMT_HOST_UPSERT);
        int r;

        bind_text(st, 1, fp_batch_str_at(b, t->host));
        if ((r = upsert_id(s, st, host, "store a host")) < 0)
                return r;
        st = ST(s, FP_STMT_TARGET_UPSERT);
        sqlite3_bind_int64(st, 1, *host);
        sqlite3_bind_int64(st, 2, t->pid);
        sqlite3_bind_int64(st, 3, (int64_t)t->starttime);
        bind_text(st, 4, fp_batch_str_at(b, t->comm));
        bind_text(st, 5, fp_batch_str_at(b, t->exe));
        bind_text(st, 6, fp_batch_str_at(b, t->config));
        sqlite3_bind_int(st, 7, t->active);
        sqlite3_bind_int64(st, 8, first_ns);
        sqlite3_bind_int64(st, 9, last_ns);
        sqlite3_bind_int64(st, 10, bucket);
        bind_text(st, 11, fp_batch_str_at(b, t->service));
        sqlite3_bind_int64(st, 12, t->guard);
        bind_text(st, 13, fp_batch_str_at(b, t->container));
        return upsert_id(s, st, id, "store a target");
}

static int write_targets(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;
        int64_t end = b->start_ns + b->length_ns;

        for (size_t i = 0; i < b->n_targets; i++) {
                int64_t host;
                int r = write_target(s, b, &b->targets[i], b->start_ns, end, w->bucket, &host,
                                     &w->target_ids[i]);
                if (r < 0)
                        return r;
                if (i == 0 && (r = write_cost(s, b, host)) < 0)
                        return r;
        }
        for (size_t i = 0; i < b->n_events; i++) {
                const struct fp_batch_event *e = &b->events[i];
                sqlite3_stmt *st = ST(s, FP_STMT_EVENT_UPSERT);
                int r;

                bind_text(st, 1, fp_batch_str_at(b, e->name));
                bind_text(st, 2, fp_batch_str_at(b, e->count_type));
                bind_text(st, 3, fp_batch_str_at(b, e->count_unit));
                bind_text(st, 4, fp_batch_str_at(b, e->value_type));
                bind_text(st, 5, fp_batch_str_at(b, e->value_unit));
                bind_text(st, 6, fp_batch_str_at(b, e->period_type));
                bind_text(st, 7, fp_batch_str_at(b, e->period_unit));
                sqlite3_bind_int64(st, 8, e->period);
                r = upsert_id(s, st, &w->event_ids[i], "store an event");
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < b->n_threads; i++) {
                const struct fp_batch_thread *t = &b->threads[i];
                sqlite3_stmt *st = ST(s, FP_STMT_THREAD_UPSERT);
                int r;

                sqlite3_bind_int64(st, 1, w->target_ids[t->target]);
                sqlite3_bind_int64(st, 2, t->tid);
                bind_text(st, 3, fp_batch_str_at(b, t->name));
                sqlite3_bind_int64(st, 4, w->bucket);
                bind_text(st, 5, fp_batch_str_at(b, t->wait));
                r = upsert_id(s, st, &w->thread_ids[i], "store a thread");
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The rowid of content hash in a deduplicated table: from the cache, else
 * from the table's hash index; 0 when absent.
 */
static int find(struct fp_store *s, struct fp_store_map *cache, enum fp_store_stmt_id find_st,
                uint64_t hash, int64_t *ret)
{
        struct fp_store_map_entry *e = fp_store_map_get(cache, hash);
        sqlite3_stmt *st;

        if (e) {
                *ret = (int64_t)e->a;
                return 0;
        }
        st = ST(s, find_st);
        sqlite3_bind_int64(st, 1, (int64_t)hash);
        CHECK_RC(s, fp_store_db_step_int(st, ret), "look up a stack's frames");
        if (*ret)
                cache_put(cache, hash, (uint64_t)*ret, 0);
        return 0;
}

static int insert_row(struct fp_store *s, sqlite3_stmt *st, struct fp_store_map *cache,
                      uint64_t hash, int64_t *ret)
{
        CHECK_RC(s, fp_store_db_step_done(st), "store a stack's frames");
        *ret = sqlite3_last_insert_rowid(s->db);
        cache_put(cache, hash, (uint64_t)*ret, 0);
        return 0;
}

static int resolve_mapping(struct writer *w, uint32_t i, int64_t *ret)
{
        struct fp_store *s = w->s;
        const struct fp_batch_mapping *m = &w->b->mappings[i];
        sqlite3_stmt *st;
        int r;

        if (w->mapping_ids[i]) {
                *ret = w->mapping_ids[i];
                return 0;
        }
        r = find(s, &s->mappings, FP_STMT_MAPPING_FIND, m->hash, ret);
        if (r < 0)
                goto out;
        if (*ret) {
                /* Stored without its ELF address (an older agent's): this batch knows it. */
                struct fp_store_map_entry *e = fp_store_map_get(&s->mappings, m->hash);
                if (m->vaddr1 && e && !e->b) {
                        st = ST(s, FP_STMT_MAPPING_VADDR);
                        sqlite3_bind_int64(st, 1, *ret);
                        sqlite3_bind_int64(st, 2, (int64_t)m->vaddr1);
                        CHECK_RC(s, fp_store_db_step_done(st), "store a mapping's address");
                        e->b = 1;
                }
                goto out;
        }
        st = ST(s, FP_STMT_MAPPING_INSERT);
        sqlite3_bind_int64(st, 1, (int64_t)m->hash);
        bind_text(st, 2, fp_batch_str_at(w->b, m->file));
        bind_text(st, 3, fp_batch_str_at(w->b, m->build_id));
        sqlite3_bind_int64(st, 4, (int64_t)m->start);
        sqlite3_bind_int64(st, 5, (int64_t)m->limit);
        sqlite3_bind_int64(st, 6, (int64_t)m->offset);
        sqlite3_bind_int64(st, 7, (int64_t)m->vaddr1);
        r = insert_row(s, st, &s->mappings, m->hash, ret);
        if (r == 0 && m->vaddr1) {
                struct fp_store_map_entry *e = fp_store_map_get(&s->mappings, m->hash);
                if (e)
                        e->b = 1;
        }
out:
        if (r == 0)
                w->mapping_ids[i] = *ret;
        return r;
}

static int resolve_function(struct writer *w, const struct fp_batch_frame *f, int64_t *ret)
{
        struct fp_store *s = w->s;
        sqlite3_stmt *st;
        int r = find(s, &s->functions, FP_STMT_FUNCTION_FIND, f->function_hash, ret);

        if (r < 0 || *ret)
                return r;
        st = ST(s, FP_STMT_FUNCTION_INSERT);
        sqlite3_bind_int64(st, 1, (int64_t)f->function_hash);
        bind_text(st, 2, fp_batch_str_at(w->b, f->function));
        bind_text(st, 3, fp_batch_str_at(w->b, f->system_name)); /* NONE: "" */
        bind_text(st, 4, fp_batch_str_at(w->b, f->filename));
        return insert_row(s, st, &s->functions, f->function_hash, ret);
}

static int resolve_frame(struct writer *w, uint32_t i, int64_t *ret)
{
        struct fp_store *s = w->s;
        const struct fp_batch_frame *f = &w->b->frames[i];
        int64_t mapping = 0, function = 0;
        sqlite3_stmt *st;
        int r;

        if (w->frame_ids[i]) {
                *ret = w->frame_ids[i];
                return 0;
        }
        struct fp_store_map_entry *e = fp_store_map_get(&s->frames, f->hash);
        if (e) {
                *ret = w->frame_ids[i] = (int64_t)e->a;
                return 0;
        }
        /* Not cached: the frame's key is its mapping's and function's ids and its offset. */
        if (f->mapping != FP_BATCH_NONE && (r = resolve_mapping(w, f->mapping, &mapping)) < 0)
                return r;
        if (f->function != FP_BATCH_NONE && (r = resolve_function(w, f, &function)) < 0)
                return r;
        uint64_t offset =
            f->address - (f->mapping != FP_BATCH_NONE ? w->b->mappings[f->mapping].start : 0);
        st = ST(s, FP_STMT_FRAME_FIND);
        sqlite3_bind_int64(st, 1, mapping);
        sqlite3_bind_int64(st, 2, (int64_t)offset);
        sqlite3_bind_int64(st, 3, function);
        sqlite3_bind_int64(st, 4, f->line);
        CHECK_RC(s, fp_store_db_step_int(st, ret), "look up a frame");
        if (*ret) {
                cache_put(&s->frames, f->hash, (uint64_t)*ret, 0);
        } else {
                st = ST(s, FP_STMT_FRAME_INSERT);
                sqlite3_bind_int64(st, 1, mapping);
                sqlite3_bind_int64(st, 2, (int64_t)offset);
                sqlite3_bind_int64(st, 3, function);
                sqlite3_bind_int64(st, 4, f->line);
                r = insert_row(s, st, &s->frames, f->hash, ret);
                if (r < 0)
                        return r;
        }
        w->frame_ids[i] = *ret;
        return 0;
}

static int insert_stack(struct writer *w, const struct fp_batch_stack *k, int64_t *ret)
{
        struct fp_store *s = w->s;
        size_t len = 0;
        sqlite3_stmt *st;
        int r;

        if (fp_grow((void **)&w->blob, &w->blob_cap, (size_t)k->n * 10 + 1, 1) < 0)
                return fp_store_db_failf(s, -ENOMEM, "Failed to store a stack: out of memory");
        for (uint32_t j = 0; j < k->n; j++) {
                int64_t id;
                r = resolve_frame(w, w->b->frame_ids[k->off + j], &id);
                if (r < 0)
                        return r;
                len += varint_put(w->blob + len, (uint64_t)id);
        }
        st = ST(s, FP_STMT_STACK_INSERT);
        sqlite3_bind_int64(st, 1, (int64_t)k->hash);
        sqlite3_bind_int64(st, 2, w->bucket);
        sqlite3_bind_blob(st, 3, w->blob, (int)len, SQLITE_STATIC);
        CHECK_RC(s, fp_store_db_step_done(st), "store a stack");
        *ret = sqlite3_last_insert_rowid(s->db);
        return 0;
}

/* The rowid of a stack the batch's samples use, marking it used by this bucket. */
static int resolve_stack(struct writer *w, uint32_t i)
{
        struct fp_store *s = w->s;
        const struct fp_batch_stack *k = &w->b->stacks[i];
        struct fp_store_map_entry *e = fp_store_map_get(&s->stacks, k->hash);
        sqlite3_stmt *st;
        int64_t id = 0;
        int r;

        if (e) {
                id = (int64_t)e->a;
                if ((int64_t)e->b < w->bucket - FP_STORE_TOUCH_SLACK) {
                        st = ST(s, FP_STMT_STACK_TOUCH_ID);
                        sqlite3_bind_int64(st, 1, id);
                        sqlite3_bind_int64(st, 2, w->bucket);
                        CHECK_RC(s, fp_store_db_step_done(st), "mark a stack used");
                        e->b = (uint64_t)w->bucket;
                }
                w->stack_ids[i] = id;
                return 0;
        }
        st = ST(s, FP_STMT_STACK_TOUCH_HASH);
        sqlite3_bind_int64(st, 1, (int64_t)k->hash);
        sqlite3_bind_int64(st, 2, w->bucket);
        CHECK_RC(s, fp_store_db_step_int(st, &id), "look up a stack");
        if (!id) {
                r = insert_stack(w, k, &id);
                if (r < 0)
                        return r;
        }
        cache_put(&s->stacks, k->hash, (uint64_t)id, (uint64_t)w->bucket);
        w->stack_ids[i] = id;
        return 0;
}

struct sample_ref {
        int64_t target, event, thread, stack;
        uint32_t idx;
};

static int sample_ref_cmp(const void *x, const void *y)
{
        const struct sample_ref *a = x, *b = y;

        if (a->target != b->target)
                return a->target < b->target ? -1 : 1;
        if (a->event != b->event)
                return a->event < b->event ? -1 : 1;
        if (a->thread != b->thread)
                return a->thread < b->thread ? -1 : 1;
        if (a->stack != b->stack)
                return a->stack < b->stack ? -1 : 1;
        return 0;
}

/*
 * One series (target, event) of the bucket: its totals row and its
 * samples, encoded (refs[0] names the series; n == 0: no samples).
 */
static int write_series(struct writer *w, const struct sample_ref *refs, size_t n,
                        struct fp_store_sample *scratch)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;
        uint64_t count = 0, value = 0;
        uint8_t *data = NULL;
        size_t len = 0;
        sqlite3_stmt *st;
        int r;

        for (size_t i = 0; i < n; i++) {
                const struct fp_batch_sample *sa = &b->samples[refs[i].idx];
                if (refs[i].thread > UINT32_MAX || refs[i].stack > UINT32_MAX)
                        return fp_store_db_failf(s, -EOVERFLOW,
                                                 "Failed to store samples: row ids past 2^32");
                scratch[i] = (struct fp_store_sample){
                    (uint32_t)refs[i].thread, (uint32_t)refs[i].stack, sa->count, sa->value};
                count += sa->count;
                value += sa->value;
        }
        st = ST(s, FP_STMT_SERIES_INSERT);
        sqlite3_bind_int64(st, 1, w->bucket);
        sqlite3_bind_int64(st, 2, refs[0].target);
        sqlite3_bind_int64(st, 3, refs[0].event);
        sqlite3_bind_int64(st, 4, count > INT64_MAX ? INT64_MAX : (int64_t)count);
        sqlite3_bind_int64(st, 5, value > INT64_MAX ? INT64_MAX : (int64_t)value);
        CHECK_RC(s, fp_store_db_step_done(st), "store sample totals");
        if ((r = fp_store_rollup_touch(s, refs[0].target, refs[0].event, b->start_ns)) < 0)
                return r;
        if (n == 0)
                return 0; /* a declared series without samples: the totals row only */
        r = fp_store_samples_encode(scratch, n, &data, &len);
        if (r < 0)
                return fp_store_db_failf(s, r, "Failed to encode samples: %s", strerror(-r));
        st = fp_store_stmt(s, FP_STMT_SERIES_SAMPLES_INSERT);
        if (!st) {
                free(data);
                return -EIO;
        }
        sqlite3_bind_int64(st, 1, w->bucket);
        sqlite3_bind_int64(st, 2, refs[0].target);
        sqlite3_bind_int64(st, 3, refs[0].event);
        sqlite3_bind_blob64(st, 4, data, len, free);
        CHECK_RC(s, fp_store_db_step_done(st), "store samples");
        return 0;
}

static int write_samples(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;
        struct sample_ref *refs = NULL;
        struct fp_store_sample *scratch = NULL;
        int r = 0;

        for (size_t i = 0; i < b->n_samples; i++) {
                uint32_t k = b->samples[i].stack;
                if (!w->stack_ids[k] && (r = resolve_stack(w, k)) < 0)
                        return r;
        }
        refs = calloc(b->n_samples ? b->n_samples : 1, sizeof(*refs));
        scratch = calloc(b->n_samples ? b->n_samples : 1, sizeof(*scratch));
        if (!refs || !scratch) {
                r = fp_store_db_failf(s, -ENOMEM, "Failed to store samples: out of memory");
                goto out;
        }
        for (size_t i = 0; i < b->n_samples; i++) {
                const struct fp_batch_sample *sa = &b->samples[i];
                refs[i] = (struct sample_ref){w->target_ids[b->threads[sa->thread].target],
                                              w->event_ids[sa->event], w->thread_ids[sa->thread],
                                              w->stack_ids[sa->stack], (uint32_t)i};
        }
        /* Series by series, each in (thread, stack) order, as the encoding wants. */
        qsort(refs, b->n_samples, sizeof(*refs), sample_ref_cmp);
        for (size_t i = 0, j; r == 0 && i < b->n_samples; i = j) {
                for (j = i + 1; j < b->n_samples && refs[j].target == refs[i].target &&
                                refs[j].event == refs[i].event;
                     j++)
                        ;
                r = write_series(w, refs + i, j - i, scratch);
        }
        /* Declared series without a sample: a row of zeros names them. */
        for (size_t t = 0; r == 0 && t < b->n_targets; t++) {
                if (!b->targets[t].series_event)
                        continue;
                struct sample_ref key = {w->target_ids[t],
                                         w->event_ids[b->targets[t].series_event - 1], 0, 0, 0};
                /* refs are sorted by (target, event): a binary search. */
                size_t lo = 0, hi = b->n_samples;
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (refs[mid].target < key.target ||
                            (refs[mid].target == key.target && refs[mid].event < key.event))
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                bool found = lo < b->n_samples && refs[lo].target == key.target &&
                             refs[lo].event == key.event;
                if (!found)
                        r = write_series(w, &key, 0, scratch);
        }
out:
        free(refs);
        free(scratch);
        return r;
}

static int write_drops(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;

        for (size_t i = 0; i < b->n_drops; i++) {
                const struct fp_batch_drop *d = &b->drops[i];
                sqlite3_stmt *st = ST(s, FP_STMT_DROP_ADD);

                sqlite3_bind_int64(st, 1, w->bucket);
                sqlite3_bind_int64(st, 2, w->target_ids[d->target]);
                bind_text(st, 3, fp_batch_str_at(b, d->reason));
                sqlite3_bind_int64(st, 4, (int64_t)d->count);
                CHECK_RC(s, fp_store_db_step_done(st), "store drop counts");
        }
        return 0;
}

/* Moves carried_drops into bucket. */
static int fold_carried(struct fp_store *s, int64_t bucket)
{
        sqlite3_stmt *st = ST(s, FP_STMT_CARRY_TOUCH_TARGETS);

        sqlite3_bind_int64(st, 1, bucket);
        CHECK_RC(s, fp_store_db_step_done(st), "carry drop counts");
        st = ST(s, FP_STMT_CARRY_FOLD);
        sqlite3_bind_int64(st, 1, bucket);
        CHECK_RC(s, fp_store_db_step_done(st), "carry drop counts");
        CHECK_RC(s, fp_store_db_step_done(ST(s, FP_STMT_CARRY_CLEAR)), "carry drop counts");
        return 0;
}

static int write_bucket(struct writer *w)
{
        struct fp_store *s = w->s;
        const struct fp_store_batch *b = w->b;
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        sqlite3_stmt *st;
        int r, rc;

        if (b->key) {
                st = ST(s, FP_STMT_KEY_FIND);
                sqlite3_bind_text(st, 1, b->key, -1, SQLITE_STATIC);
                rc = sqlite3_step(st);
                sqlite3_reset(st);
                if (rc == SQLITE_ROW)
                        return fp_store_db_failf(
                            s, -EALREADY, "A bucket with key '%s' is already stored", b->key);
                CHECK_RC(s, rc == SQLITE_DONE ? SQLITE_OK : rc, "look up an idempotency key");
        }
        st = ST(s, FP_STMT_BUCKET_INSERT);
        sqlite3_bind_int64(st, 1, b->start_ns);
        sqlite3_bind_int64(st, 2, b->length_ns);
        sqlite3_bind_int64(st, 3, now);
        if (b->uploaded)
                sqlite3_bind_int64(st, 4, now);
        else
                sqlite3_bind_null(st, 4);
        sqlite3_bind_int64(st, 5, (int64_t)(b->cost.agent_cpu_ns & INT64_MAX));
        sqlite3_bind_int64(st, 6, (int64_t)(b->cost.agent_rss_bytes & INT64_MAX));
        sqlite3_bind_int64(st, 7, b->cost.host_cpus);
        CHECK_RC(s, fp_store_db_step_done(st), "store a bucket");
        w->bucket = sqlite3_last_insert_rowid(s->db);
        if (b->key) {
                st = ST(s, FP_STMT_KEY_INSERT);
                sqlite3_bind_text(st, 1, b->key, -1, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, w->bucket);
                CHECK_RC(s, fp_store_db_step_done(st), "store an idempotency key");
        }

        if ((r = write_targets(w)) < 0 || (r = write_samples(w)) < 0 || (r = write_drops(w)) < 0)
                return r;
        /* Drops of evicted or rejected buckets: reported with this one. */
        return fold_carried(s, w->bucket);
}

static void writer_free(struct writer *w)
{
        free(w->target_ids);
        free(w->event_ids);
        free(w->thread_ids);
        free(w->stack_ids);
        free(w->frame_ids);
        free(w->mapping_ids);
        free(w->blob);
}

static int64_t *ids_new(size_t n)
{
        return calloc(n ? n : 1, sizeof(int64_t));
}

/* Writes one batch inside the open transaction. */
static int write_one(struct fp_store *s, const struct fp_store_batch *b)
{
        struct writer w = {.s = s, .b = b};
        int r;

        w.target_ids = ids_new(b->n_targets);
        w.event_ids = ids_new(b->n_events);
        w.thread_ids = ids_new(b->n_threads);
        w.stack_ids = ids_new(b->n_stacks);
        w.frame_ids = ids_new(b->n_frames);
        w.mapping_ids = ids_new(b->n_mappings);
        if (!w.target_ids || !w.event_ids || !w.thread_ids || !w.stack_ids || !w.frame_ids ||
            !w.mapping_ids)
                r = fp_store_db_failf(s, -ENOMEM, "Failed to write a bucket: out of memory");
        else
                r = write_bucket(&w);
        /*
         * A mapping whose ELF address this batch knows: stored with it, also
         * when every frame in it was known (its mapping never looked up).
         */
        for (size_t i = 0; r == 0 && i < b->n_mappings; i++) {
                int64_t id;
                if (b->mappings[i].vaddr1 && !w.mapping_ids[i])
                        r = resolve_mapping(&w, (uint32_t)i, &id);
        }
        writer_free(&w);
        return r;
}

int fp_store_write_batches(struct fp_store *s, const struct fp_store_batch *const *batches,
                           size_t n, int *results)
{
        int64_t live_before = 0, live_after;
        bool full = false, evict_full = false;
        uint64_t reserve;
        int r, rc, log = 0, stored = 0;

        s->errmsg[0] = '\0';
        /*
         * Make room first, so the write fills freed pages and its log fits
         * the budget too; the newest bucket stays until this write is in,
         * unless the disk was found full (the budget in force was lowered).
         */
        if (s->budget && !s->readonly) {
                reserve = fp_store_write_reserve(s);
                (void)fp_store_evict(s, reserve, !fp_store_disk_was_full(s), &full);
                live_before = fp_store_live_bytes(s, &rc);
        }
        r = fp_store_db_begin(s);
        for (size_t i = 0; i < n; i++)
                results[i] = r;
        if (r == 0) {
                /*
                 * A duplicate key is found before anything of its batch is
                 * written, so it leaves nothing to undo; any other failure
                 * undoes the whole transaction.
                 */
                for (size_t i = 0; i < n && r == 0; i++) {
                        results[i] = write_one(s, batches[i]);
                        if (results[i] == 0)
                                stored++;
                        else if (results[i] != -EALREADY)
                                r = results[i];
                }
                if (r == 0)
                        r = fp_store_db_commit(s);
                if (r < 0) {
                        fp_store_db_rollback(s);
                        for (size_t i = 0; i < n; i++)
                                if (results[i] != -EALREADY)
                                        results[i] = r;
                }
        }
        if (r == -ENOSPC) {
                fp_store_make_room(s);
                return r;
        }
        if (r < 0)
                return r;
        if (stored == 0) {
                s->errmsg[0] = '\0';
                return 0; /* nothing was written: the budget is as it was */
        }
        /*
         * Committed. Learn what a write takes, keep the budget (a failure
         * here is retried after the next write), and make room now when a
         * checkpoint found the disk full: the next write would not fit.
         */
        rc = fp_store_db_checkpoint(s, SQLITE_CHECKPOINT_PASSIVE, &log);
        if (s->budget) {
                live_after = fp_store_live_bytes(s, &r);
                if (r == SQLITE_OK && live_after > live_before)
                        learn(&s->est_growth, (uint64_t)(live_after - live_before));
                if (log > 0)
                        learn(&s->est_log, (uint64_t)log * (uint64_t)(s->page_size + 24));
        }
        full = (rc & 0xff) == SQLITE_FULL || fp_store_db_errno(s->db, rc) == -ENOSPC;
        (void)fp_store_evict(s, 0, false, &evict_full);
        rc = fp_store_reclaim(s, false);
        if (full || evict_full || (rc & 0xff) == SQLITE_FULL ||
            fp_store_db_errno(s->db, rc) == -ENOSPC)
                fp_store_make_room(s);
        s->errmsg[0] = '\0';
        return stored;
}

int fp_store_write_batch(struct fp_store *s, const struct fp_store_batch *b)
{
        int result = 0, r = fp_store_write_batches(s, &b, 1, &result);

        if (r < 0)
                return r;
        if (result == -EALREADY)
                fp_store_db_failf(s, -EALREADY, "A bucket with key '%s' is already stored", b->key);
        return result;
}

int fp_store_note_target(struct fp_store *s, const struct fp_store_target *t)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME), host = 0, id = 0, next = 0;
        struct fp_store_batch *b;
        sqlite3_stmt *st = NULL;
        uint32_t idx;
        int r;

        s->errmsg[0] = '\0';
        if (t->pid <= 0)
                return -EINVAL;
        if (s->readonly)
                return fp_store_db_failf(s, -EROFS,
                                         "Failed to note a target: the store is read-only");
        /* A batch of the target alone: its strings (and the host's name) as a bucket's are. */
        if (!(b = fp_store_batch_new(now, 0)))
                return -ENOMEM;
        if ((r = fp_store_batch_add_target(b, t, &idx)) < 0)
                goto out;
        /* The bucket that will hold its first samples: the row lives at least until then. */
        if ((r = fp_store_prepare(s, "SELECT coalesce(max(id), 0) + 1 FROM buckets", &st)) < 0)
                goto out;
        int rc = fp_store_db_step_int(st, &next);
        sqlite3_finalize(st);
        if (rc != SQLITE_OK) {
                r = fp_store_db_fail(s, rc, "find the newest bucket");
                goto out;
        }
        if ((r = fp_store_db_begin(s)) < 0)
                goto out;
        r = write_target(s, b, &b->targets[idx], now, now, next, &host, &id);
        if (r == 0)
                r = fp_store_db_commit(s);
        if (r < 0)
                fp_store_db_rollback(s);
out:
        fp_store_batch_free(b);
        return r;
}
