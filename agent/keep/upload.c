/* SPDX-License-Identifier: MIT */
/*
 * Store-and-forward upload; see upload.h for the round and its rules.
 *
 * State machine of the uploader (loop thread):
 *
 *   IDLE --timer or flush--> PREPARING (writer thread: fill the outbox, read it)
 *   PREPARING --uploads--> SENDING (libcurl multi, one easy handle per upload)
 *   SENDING --all answered--> SETTLING (writer thread: take out what is done,
 *                                       split what was too large) --> IDLE
 *
 * A round with a transient or configuration failure ends IDLE with a
 * backoff; what failed stays in the outbox for the next round.
 *
 * libcurl is driven by libevent: curl tells which sockets to watch
 * (socket callback) and when to call back (timer callback); libevent
 * events call curl_multi_socket_action().
 */
#include "upload.h"
#include "upload_contract.h"
#include "targetconf.h"
#include "log.h"
#include "pprof.h"
#include "store.h"
#include "util.h"
#include "writer.h"
#include "wire.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define MAX_BUCKETS_PER_ROUND 64
#define MAX_UPLOADS_PER_ROUND 256
#define MAX_FLUSH_ROUNDS      32
#define BACKOFF_MIN_S         1
#define BACKOFF_MAX_S         300

enum state {
        IDLE,
        PREPARING,
        SENDING,
        SETTLING,
};

enum outcome {
        PENDING,
        DELIVERED,
        REFUSED,   /* for good: the profile is malformed */
        TOO_LARGE, /* 413: split */
        TRANSIENT, /* retry after a backoff */
        MISCONFIGURED,
};

/* One POST: an upload of the outbox. */
struct item {
        struct fp_uploader *u;
        struct fp_store_upload up; /* host, event, query point into strs; body owned */
        char *strs;
        uint8_t *body;
        CURL *easy;
        struct curl_slist *headers;
        uint8_t *wire; /* the body in the round's protocol (NULL: body, the native one) */
        size_t wire_len;
        char error[CURL_ERROR_SIZE + 512]; /* curl's error buffer, then our line */
        char response[512];
        size_t response_len;
        enum outcome outcome;
};

/* Work shared with the writer thread: owned by the round's job while it runs. */
struct round {
        enum fp_wire wire; /* the protocol of the collector this round goes to */
        long retry_after;  /* seconds a collector asked to wait (Retry-After), at most */
        struct item *items;
        size_t n_items, cap_items;
        uint64_t buckets_moved; /* buckets this round moved into the outbox */
        bool more;              /* the store holds more to send than this round took */
        size_t split;           /* uploads split, too large */
        size_t too_large;       /* uploads refused: too large and could not be split */
        char error[256];
};

struct fp_uploader {
        struct event_base *base;
        struct fp_writer *writer;
        char **urls;         /* the collectors, tried in turn (with their protocol's prefix) */
        enum fp_wire *wires; /* the protocol of each */
        size_t *http;        /* where each one's http(s):// starts */
        size_t n_urls, cur;
        const char *url;       /* urls[cur] */
        size_t tried_since_ok; /* collectors failed over from since the last good round */
        bool quick_retry;      /* the next collector gets the round at once */
        struct fp_wire_credentials cred;
        const char *cred_source; /* the option they came from, for the log */
        char *ca_file;
        unsigned interval;

        enum state state;
        struct round *round;
        struct event *ev_round;
        CURLM *multi;
        struct event *ev_curl_timer;
        size_t in_flight;
        unsigned backoff_s;
        long retry_after; /* what the last failed round's collector asked to wait, seconds */
        unsigned flush_rounds;
        size_t flush_sent; /* uploads delivered by the rounds of this flush */
        char hostname[256];

        fp_upload_done_fn flush_done;
        void *flush_userdata;
        bool flush_again; /* a flush arrived during a round */
        bool closing;     /* being freed: results from the writer only free their round */

        struct fp_upload_status st;
};

/* A random factor in [1 - spread, 1 + spread]. */
static double jitter(double spread)
{
        return 1.0 + spread * (2.0 * ((double)random() / (double)RAND_MAX) - 1.0);
}

static void item_clear(struct item *it)
{
        if (it->easy) {
                if (it->u && it->u->multi)
                        curl_multi_remove_handle(it->u->multi, it->easy);
                curl_easy_cleanup(it->easy);
        }
        curl_slist_free_all(it->headers);
        free(it->strs);
        free(it->body);
        free(it->wire);
        memset(it, 0, sizeof(*it));
}

static void round_reset(struct round *r)
{
        for (size_t i = 0; i < r->n_items; i++)
                item_clear(&r->items[i]);
        r->n_items = 0;
        r->buckets_moved = 0;
        r->more = false;
        r->split = 0;
        r->too_large = 0;
        r->retry_after = 0;
        r->error[0] = 0;
}

static void round_free(struct round *r)
{
        if (!r)
                return;
        round_reset(r);
        free(r->items);
        free(r);
}

/* ---- writer thread: build uploads, read the outbox, settle ---- */

/* A fresh idempotency key: 128 random bits in hex. */
static void new_key(char out[40])
{
        static uint64_t fallback;
        uint64_t k[2];

        if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
                k[0] = fp_now_ns(CLOCK_REALTIME) ^ ((uint64_t)getpid() << 32);
                k[1] = fp_now_ns(CLOCK_MONOTONIC) + ++fallback * 0x9e3779b97f4a7c15ULL;
        }
        snprintf(out, 40, "%016" PRIx64 "%016" PRIx64, k[0], k[1]);
}

/* Sums a stored drop row into the upload's drops (reasons past the contract's cap: "other"). */
static int add_drop(void *userdata, const struct fp_store_drop *d)
{
        struct fp_upload_meta *m = userdata;
        size_t i;

        for (i = 0; i < m->n_drops; i++)
                if (strcmp(m->drops[i].reason, d->reason) == 0)
                        break;
        if (i == m->n_drops) {
                if (m->n_drops == FP_UPLOAD_MAX_DROPS) {
                        i = FP_UPLOAD_MAX_DROPS - 1;
                        snprintf(m->drops[i].reason, sizeof(m->drops[i].reason), "other");
                } else {
                        m->n_drops++;
                        snprintf(m->drops[i].reason, sizeof(m->drops[i].reason), "%s", d->reason);
                }
        }
        m->drops[i].count += d->count;
        return 0;
}

/*
 * Builds the upload of one series over buckets [bmin, bmax] (of a host
 * tier's round: all its series of m's host and event): its profile, drops
 * (unless a counter) and query, from m's identity. 0 with ret->len == 0
 * when the range holds neither samples nor drops of it; ret->body and
 * *ret_query are malloc'd.
 */
static int build_upload(struct fp_store *store, struct fp_upload_meta *m, bool counter,
                        int64_t bmin, int64_t bmax, struct fp_store_upload *ret, char **ret_query)
{
        struct fp_store_filter f = {.pid = m->pid,
                                    .starttime = m->starttime,
                                    .event = m->event,
                                    .bucket_min = bmin,
                                    .bucket_max = bmax};
        if (m->host_tier)
                f = (struct fp_store_filter){.host = m->host,
                                             .event = m->event,
                                             .bucket_min = bmin,
                                             .bucket_max = bmax,
                                             .tier = FP_STORE_TIER_HOST};
        struct fp_pprof *p = fp_pprof_new();
        uint8_t *body = NULL;
        size_t len = 0;
        int64_t t0 = 0, d0 = 0;
        int e;

        *ret = (struct fp_store_upload){0};
        *ret_query = NULL;
        if (!p)
                return -ENOMEM;
        e = fp_store_query_pprof(store, &f, p);
        m->n_drops = 0;
        memset(m->drops, 0, sizeof(m->drops));
        if (e >= 0 && !counter)
                (void)fp_store_drop_totals(store, &f, add_drop, m);
        if (e < 0 || (e == 0 && (m->n_drops == 0 || fp_pprof_n_sample_types(p) == 0))) {
                fp_pprof_free(p);
                return e; /* nothing to send for it (a series with only drops: they go) */
        }
        ret->samples = (uint64_t)fp_pprof_total(p, 0);
        fp_pprof_get_time(p, &t0, &d0);
        e = fp_pprof_encode(p, 1, &body, &len);
        fp_pprof_free(p);
        if (e < 0)
                return e;
        m->from_ns = t0;
        m->to_ns = t0 + d0;
        snprintf(m->agent, sizeof(m->agent), "%s", FP_VERSION);
        /* What profiling cost the host over the buckets: the same for every series of them. */
        struct fp_store_cost cost = {0};
        if (fp_store_bucket_cost(store, bmin, bmax, &cost) == 0 && cost.host_cpus &&
            cost.to_ns > cost.from_ns) {
                m->cost.agent_cpu_ns = cost.agent_cpu_ns;
                m->cost.agent_rss_bytes = cost.agent_rss_bytes;
                m->cost.host_cpus = cost.host_cpus;
                m->cost.from_ns = cost.from_ns;
                m->cost.to_ns = cost.to_ns;
        }
        e = fp_upload_encode_query(m, ret_query);
        if (e < 0) {
                free(body);
                return e;
        }
        new_key(ret->key);
        ret->host = m->host;
        ret->event = m->event;
        ret->pid = (int32_t)m->pid;
        ret->starttime = m->starttime;
        ret->bucket_min = bmin;
        ret->bucket_max = bmax;
        ret->from_ns = m->from_ns;
        ret->to_ns = m->to_ns;
        ret->counter = counter;
        ret->query = *ret_query;
        ret->body = body;
        ret->len = len;
        return 0;
}

/* Uploads being built by one round, before they go into the outbox. */
struct building {
        struct fp_store *store;
        int64_t bmin, bmax;
        struct fp_store_upload *v;
        char **queries;
        size_t n, cap;
        /* The host tier's (host, event) pairs: one upload each, after the series. */
        struct fp_upload_meta *host_rounds;
        size_t n_host_rounds;
};

static void building_free(struct building *b)
{
        for (size_t i = 0; i < b->n; i++) {
                free((void *)b->v[i].host);
                free((void *)b->v[i].event);
                free((void *)b->v[i].body);
                free(b->queries[i]);
        }
        free(b->v);
        free(b->queries);
        free(b->host_rounds);
}

/* Builds the upload of m over the round's buckets and keeps it (m is freed). */
static int add_upload(struct building *b, struct fp_upload_meta *m, bool counter)
{
        struct fp_store_upload up;
        char *query = NULL;
        int e = build_upload(b->store, m, counter, b->bmin, b->bmax, &up, &query);

        if (e < 0 || !up.len) {
                free(m);
                return e;
        }
        if (b->n == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 8;
                void *v = realloc(b->v, cap * sizeof(*b->v));
                void *q = v ? realloc(b->queries, cap * sizeof(*b->queries)) : NULL;
                if (v)
                        b->v = v;
                if (!v || !q) {
                        free((void *)up.body);
                        free(query);
                        free(m);
                        return -ENOMEM;
                }
                b->queries = q;
                b->cap = cap;
        }
        /* host and event point into m, which goes: the batch keeps copies. */
        up.host = strdup(m->host);
        up.event = strdup(m->event);
        free(m);
        b->v[b->n] = up;
        b->queries[b->n] = query;
        b->n++;
        return up.host && up.event ? 0 : -ENOMEM;
}

/*
 * Notes the host and event of a host tier's series: the tier's series of a
 * round travel together (add_host_rounds()).
 */
static int note_host_round(struct building *b, const struct fp_store_series *se)
{
        struct fp_upload_meta *m;

        for (size_t i = 0; i < b->n_host_rounds; i++)
                if (strcmp(b->host_rounds[i].host, se->host) == 0 &&
                    strcmp(b->host_rounds[i].event, se->event) == 0)
                        return 0;
        m = realloc(b->host_rounds, (b->n_host_rounds + 1) * sizeof(*m));
        if (!m)
                return -ENOMEM;
        b->host_rounds = m;
        m = &m[b->n_host_rounds++];
        *m = (struct fp_upload_meta){.pid = 0, .host_tier = true};
        snprintf(m->host, sizeof(m->host), "%s", se->host);
        snprintf(m->event, sizeof(m->event), "%s", se->event);
        /* The tier's own series (export.c): it takes the round's drops. */
        m->starttime = fp_upload_host_series_key("", "", "");
        snprintf(m->comm, sizeof(m->comm), "[host tier]");
        return 0;
}

static int add_host_rounds(struct building *b)
{
        int e = 0;

        for (size_t i = 0; e >= 0 && i < b->n_host_rounds; i++) {
                struct fp_upload_meta *m = malloc(sizeof(*m));
                if (!m)
                        return -ENOMEM;
                *m = b->host_rounds[i];
                e = add_upload(b, m, false);
        }
        return e;
}

static int build_series(void *userdata, const struct fp_store_series *se)
{
        struct building *b = userdata;
        struct fp_upload_meta *m;

        if (se->pid == 0)
                return note_host_round(b, se);
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        snprintf(m->host, sizeof(m->host), "%s", se->host ? se->host : "");
        m->pid = se->pid;
        m->starttime = se->starttime;
        snprintf(m->comm, sizeof(m->comm), "%s", se->comm ? se->comm : "");
        snprintf(m->exe, sizeof(m->exe), "%s", se->exe ? se->exe : "");
        snprintf(m->event, sizeof(m->event), "%s", se->event);
        snprintf(m->service, sizeof(m->service), "%s", se->service ? se->service : "");
        /*
         * A counter of a group (config "event=LEADER,COUNTER,...") shares the
         * samples of its leader: the target's drops travel with the leader's
         * profile only, so the collector counts them once.
         */
        char leader[FP_PERF_EVENT_NAME_MAX + 1];
        fp_targetconf_event(se->config, 0, leader, sizeof(leader));
        return add_upload(b, m, leader[0] && strcmp(leader, se->event) != 0);
}

/* Moves up to a round of pending buckets into the outbox. Buckets moved, or -errno. */
static int fill_outbox(struct fp_store *store, struct round *r)
{
        struct fp_store_bucket b[MAX_BUCKETS_PER_ROUND + 1];
        int64_t ids[MAX_BUCKETS_PER_ROUND];
        struct building bl = {.store = store};
        int n, e;

        n = fp_store_pending_uploads(store, b, MAX_BUCKETS_PER_ROUND + 1);
        if (n <= 0)
                return n;
        r->more = n > MAX_BUCKETS_PER_ROUND;
        if (r->more)
                n = MAX_BUCKETS_PER_ROUND;
        for (int j = 0; j < n; j++)
                ids[j] = b[j].id;
        bl.bmin = ids[0];
        bl.bmax = ids[n - 1];
        struct fp_store_filter f = {.bucket_min = bl.bmin, .bucket_max = bl.bmax};
        e = fp_store_list_series(store, &f, build_series, &bl);
        if (e >= 0)
                e = add_host_rounds(&bl);
        if (e >= 0)
                e = fp_store_outbox_add(store, bl.v, bl.n, ids, (size_t)n);
        building_free(&bl);
        return e < 0 ? e : n;
}

/* Copies an outbox upload into the round's items. */
static int load_item(void *userdata, const struct fp_store_upload *up)
{
        struct round *r = userdata;
        struct item it = {.up = *up};
        size_t lh = strlen(up->host) + 1, le = strlen(up->event) + 1, lq = strlen(up->query) + 1;

        it.strs = malloc(lh + le + lq);
        it.body = malloc(up->len ? up->len : 1);
        if (!it.strs || !it.body) {
                item_clear(&it);
                return -ENOMEM;
        }
        memcpy(it.strs, up->host, lh);
        memcpy(it.strs + lh, up->event, le);
        memcpy(it.strs + lh + le, up->query, lq);
        memcpy(it.body, up->body, up->len);
        it.up.host = it.strs;
        it.up.event = it.strs + lh;
        it.up.query = it.strs + lh + le;
        it.up.body = it.body;
        if (r->n_items == r->cap_items) {
                size_t cap = r->cap_items ? r->cap_items * 2 : 8;
                void *q = realloc(r->items, cap * sizeof(*r->items));
                if (!q) {
                        item_clear(&it);
                        return -ENOMEM;
                }
                r->items = q;
                r->cap_items = cap;
        }
        r->items[r->n_items++] = it;
        return 0;
}

/*
 * Writer thread: each upload's body in the round's protocol, made from
 * what the outbox holds (the same bytes every time). One that cannot be
 * made is refused for good (its stored profile is damaged), unless memory
 * ran out.
 */
static void make_wire(struct round *r)
{
        struct fp_upload_meta *m;

        if (r->wire == FP_WIRE_NATIVE)
                return;
        m = malloc(sizeof(*m));
        for (size_t i = 0; i < r->n_items; i++) {
                struct item *it = &r->items[i];
                char err[256] = "out of memory";
                int e = -ENOMEM;
                if (m && (e = fp_upload_parse_query(it->up.query, m, err, sizeof(err))) == 0)
                        e = fp_wire_body(r->wire, m, it->up.key, it->up.body, it->up.len, &it->wire,
                                         &it->wire_len, err, sizeof(err));
                if (e < 0) {
                        snprintf(it->error, sizeof(it->error), "%s", err);
                        it->outcome = e == -ENOMEM ? TRANSIENT : REFUSED;
                }
        }
        free(m);
}

/*
 * Writer thread: sends what waits in the outbox; when nothing does, moves
 * the oldest pending buckets in first.
 */
static int prepare(struct fp_store *store, void *arg)
{
        struct round *r = arg;
        int n;

        round_reset(r);
        if (!store) {
                snprintf(r->error, sizeof(r->error), "the store is unavailable");
                return -ENODEV;
        }
        n = fp_store_outbox_list(store, MAX_UPLOADS_PER_ROUND, load_item, r);
        if (n == 0) {
                n = fill_outbox(store, r);
                if (n > 0) {
                        r->buckets_moved = (uint64_t)n;
                        n = fp_store_outbox_list(store, MAX_UPLOADS_PER_ROUND, load_item, r);
                }
        }
        if (n < 0) {
                snprintf(r->error, sizeof(r->error), "%s", fp_store_errmsg(store));
                return n;
        }
        make_wire(r);
        return 0;
}

/*
 * Splits a too large upload in two halves of its buckets (in the outbox,
 * replacing it). 1 when split, 0 when it cannot be (its samples are in one
 * bucket, or its buckets are gone): the caller refuses it; or -errno.
 *
 * Its range may hold empty buckets (a target idle at its end, say), so a
 * half that comes back empty narrows the range to the other half and the
 * cut is tried again: each half sent holds something, and a split always
 * makes the upload smaller.
 */
static int split(struct fp_store *store, const struct item *it)
{
        struct fp_upload_meta *m = calloc(1, sizeof(*m));
        struct fp_store_upload half[2];
        char *query[2] = {NULL, NULL};
        char err[128];
        size_t n = 0;
        int e = 0;

        if (!m)
                return -ENOMEM;
        if (fp_upload_parse_query(it->up.query, m, err, sizeof(err)) < 0) {
                free(m);
                return 0;
        }
        int64_t lo = it->up.bucket_min, hi = it->up.bucket_max;
        uint64_t rebuilt = 0;
        while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2;
                int64_t range[2][2] = {{lo, mid}, {mid + 1, hi}};
                bool empty[2] = {false, false};
                rebuilt = 0;
                for (int h = 0; h < 2 && e >= 0; h++) {
                        e = build_upload(store, m, it->up.counter, range[h][0], range[h][1],
                                         &half[n], &query[n]);
                        if (e >= 0 && half[n].len)
                                rebuilt += half[n++].samples;
                        else
                                empty[h] = true;
                }
                if (e < 0 || n == 2)
                        break;
                for (size_t i = 0; i < n; i++) {
                        free((void *)half[i].body);
                        free(query[i]);
                }
                n = 0;
                if (empty[0] && empty[1])
                        break;
                if (empty[0])
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /*
         * Its buckets may have been evicted since it was built (they were
         * marked uploaded): then the halves would silently lose samples, so
         * it is refused instead, and counted.
         */
        if (e >= 0 && (n != 2 || rebuilt != it->up.samples))
                e = 0;
        else if (e >= 0)
                e = fp_store_outbox_end(store, it->up.id, FP_UPLOAD_REPLACED, half, n) ?: 1;
        for (size_t i = 0; i < n; i++) {
                free((void *)half[i].body);
                free(query[i]);
        }
        free(m);
        return e;
}

static int count_one(void *userdata, const struct fp_store_upload *up)
{
        (void)userdata;
        (void)up;
        return 0;
}

/* Writer thread: takes out of the outbox what the collector answered for good. */
static int settle(struct fp_store *store, void *arg)
{
        struct round *r = arg;
        int e = 0;

        if (!store)
                return -ENODEV;
        for (size_t i = 0; i < r->n_items && e >= 0; i++) {
                struct item *it = &r->items[i];
                switch (it->outcome) {
                case DELIVERED:
                        e = fp_store_outbox_end(store, it->up.id, FP_UPLOAD_DELIVERED, NULL, 0);
                        break;
                case REFUSED:
                        e = fp_store_outbox_end(store, it->up.id, FP_UPLOAD_REFUSED, NULL, 0);
                        break;
                case TOO_LARGE:
                        e = split(store, it);
                        if (e == 1) {
                                r->split++;
                        } else if (e == 0) {
                                fp_log(LOG_ERR,
                                       "The profile of %d (%s, %zu bytes) is larger than the "
                                       "collector accepts and cannot be split (one bucket, or "
                                       "its buckets were evicted): refused; raise the "
                                       "collector's --max-body-mb",
                                       (int)it->up.pid, it->up.event, it->up.len);
                                it->outcome = REFUSED;
                                r->too_large++;
                                e = fp_store_outbox_end(store, it->up.id, FP_UPLOAD_REFUSED, NULL,
                                                        0);
                        }
                        break;
                default:
                        break;
                }
        }
        if (e < 0) {
                snprintf(r->error, sizeof(r->error), "%s", fp_store_errmsg(store));
                return e;
        }
        int pending = fp_store_count_pending(store);
        int waiting = fp_store_outbox_list(store, 1, count_one, NULL);
        r->more = pending > 0 || waiting > 0;
        return 0;
}

/* ---- the round ---- */

static void arm(struct fp_uploader *u, double seconds)
{
        struct timeval tv = {.tv_sec = (time_t)seconds,
                             .tv_usec = (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
        u->st.next_attempt_ns = (int64_t)fp_now_ns(CLOCK_REALTIME) + (int64_t)(seconds * 1e9);
        event_add(u->ev_round, &tv);
}

static void start_round(struct fp_uploader *u);

/*
 * The end of a round: ok when everything it sent was answered for good;
 * more when the store holds more to send (the next round comes at once).
 */
static void round_end(struct fp_uploader *u, bool ok, bool more, const char *message)
{
        u->state = IDLE;
        if (ok) {
                u->st.rounds_ok++;
                u->backoff_s = 0;
                u->st.last_error[0] = 0;
                u->st.config_error = false;
                u->tried_since_ok = 0;
        } else {
                u->st.rounds_failed++;
                snprintf(u->st.last_error, sizeof(u->st.last_error), "%s", message);
                if (!u->quick_retry) {
                        u->backoff_s = u->backoff_s ? u->backoff_s * 2 : BACKOFF_MIN_S;
                        if (u->backoff_s > BACKOFF_MAX_S)
                                u->backoff_s = BACKOFF_MAX_S;
                }
        }
        u->retry_after = ok || !u->round ? 0 : u->round->retry_after;
        if (u->round)
                round_reset(u->round);
        if (u->flush_done && ok && more && ++u->flush_rounds < MAX_FLUSH_ROUNDS) {
                /* A flush delivers everything there is, a round after another. */
                start_round(u);
                return;
        }
        if (u->flush_done && !ok && u->quick_retry) {
                /* A flush goes on with the next collector. */
                u->quick_retry = false;
                start_round(u);
                return;
        }
        if (u->flush_again) {
                /* A flush came while this round ran: one more, with the newest buckets. */
                u->flush_again = false;
                start_round(u);
                return;
        }
        if (u->flush_done) {
                fp_upload_done_fn done = u->flush_done;
                char summary[300];
                if (ok && u->flush_rounds > 0) {
                        /* Several rounds: say what they did together. */
                        snprintf(summary, sizeof(summary), "uploaded %zu profile%s to %.200s",
                                 u->flush_sent, u->flush_sent == 1 ? "" : "s", u->url);
                        message = summary;
                }
                u->flush_done = NULL;
                u->flush_rounds = 0;
                u->flush_sent = 0;
                done(u->flush_userdata, ok, message);
        }
        if (!ok && u->quick_retry) {
                u->quick_retry = false;
                arm(u, 0.1); /* the next collector, before backing off */
        } else if (!ok) {
                /* At least as long as a collector asked (Retry-After). */
                double wait = u->backoff_s * jitter(0.25);
                arm(u, wait > (double)u->retry_after ? wait : (double)u->retry_after);
        } else if (more) {
                arm(u, 0.05); /* catch up: the store holds more than one round */
        } else {
                arm(u, u->interval * jitter(0.1));
        }
}

/* The round's failure, for status and the log: the first of the most serious kind. */
static const struct item *worst(const struct round *r, size_t *ret_n)
{
        const struct item *w = NULL;
        size_t n = 0;

        for (size_t i = 0; i < r->n_items; i++) {
                const struct item *it = &r->items[i];
                if (it->outcome != TRANSIENT && it->outcome != MISCONFIGURED)
                        continue;
                n++;
                if (!w || (it->outcome == MISCONFIGURED && w->outcome != MISCONFIGURED))
                        w = it;
        }
        *ret_n = n;
        return w;
}

/*
 * After a failed round with several collectors: the next one gets the
 * data (the same bytes and keys, so nothing is stored twice), at once
 * until each has failed once since the last good round.
 */
static void fail_over(struct fp_uploader *u)
{
        if (u->n_urls < 2)
                return;
        u->cur = (u->cur + 1) % u->n_urls;
        u->url = u->urls[u->cur];
        u->st.failovers++;
        u->quick_retry = ++u->tried_since_ok < u->n_urls;
        fp_log(LOG_WARNING, "Uploads fail over to collector %s", u->url);
}

static void on_settled(void *userdata, const struct fp_writer_result *res)
{
        struct fp_uploader *u = userdata;
        struct round *r = res->arg;
        size_t sent = 0, refused = 0, failed = 0;
        char msg[900];

        if (u->closing) {
                round_free(r);
                u->round = NULL;
                u->state = IDLE;
                return;
        }
        if (res->error < 0) {
                snprintf(msg, sizeof(msg), "cannot record what was uploaded: %.200s", r->error);
                round_end(u, false, false, msg);
                return;
        }
        for (size_t i = 0; i < r->n_items; i++) {
                sent += r->items[i].outcome == DELIVERED;
                refused += r->items[i].outcome == REFUSED;
        }
        u->st.buckets_built += r->buckets_moved;
        u->st.uploads_rejected += r->too_large;
        u->flush_sent += sent;
        if (sent)
                u->st.last_success_ns = (int64_t)fp_now_ns(CLOCK_REALTIME);
        const struct item *w = worst(r, &failed);
        if (w) {
                u->st.config_error = w->outcome == MISCONFIGURED;
                snprintf(msg, sizeof(msg),
                         "%s%.700s (%zu of %zu uploads); %zu delivered, the rest wait",
                         u->st.config_error ? "CONFIGURATION ERROR: " : "", w->error, failed,
                         r->n_items, sent);
                fp_log(LOG_ERR, "Upload to %s failed: %s", u->url, msg);
                fail_over(u);
                round_end(u, false, false, msg);
                return;
        }
        snprintf(msg, sizeof(msg), "uploaded %zu profile%s to %s%s%s", sent, sent == 1 ? "" : "s",
                 u->url, refused ? "; some were refused, see the log" : "",
                 r->split ? "; some were too large and were split" : "");
        round_end(u, true, r->more, msg);
}

static void sending_done(struct fp_uploader *u)
{
        u->state = SETTLING;
        if (fp_writer_submit_call(u->writer, settle, u->round, on_settled, u) < 0)
                round_end(u, false, false, "cannot queue the recording of what was uploaded");
}

/*
 * Whether an answer is worth a retry. OTLP's specification names 429, 502,
 * 503 and 504 (and a timeout is one too): any other 5xx is for good.
 */
static bool transient_code(enum fp_wire w, long code)
{
        if (code == 408 || code == 429)
                return true;
        if (w == FP_WIRE_OTLP)
                return code == 502 || code == 503 || code == 504;
        return code >= 500;
}

/* What an HTTP answer means for an upload, with a line saying so. */
static enum outcome classify(const struct fp_uploader *u, struct item *it, long code)
{
        enum fp_wire w = u->round->wire;
        const char *loc = NULL, *path = fp_wire_path(w);

        if (code >= 200 && code < 300)
                return DELIVERED;
        if (code == 400 || code == 422 || (code >= 500 && !transient_code(w, code))) {
                snprintf(it->error, sizeof(it->error), "HTTP %ld: %.200s", code, it->response);
                return REFUSED;
        }
        if (code == 413) {
                snprintf(it->error, sizeof(it->error), "HTTP 413: %zu bytes are too large",
                         it->wire ? it->wire_len : it->up.len);
                return TOO_LARGE;
        }
        if (transient_code(w, code)) {
                snprintf(it->error, sizeof(it->error), "HTTP %ld: %.200s", code, it->response);
                return TRANSIENT;
        }
        if (code >= 300 && code < 400) {
                if (it->easy)
                        curl_easy_getinfo(it->easy, CURLINFO_REDIRECT_URL, &loc);
                /* Where it points, without the upload's own path and query. */
                size_t n = loc ? strcspn(loc, "?") : 0;
                const char *at = loc ? strstr(loc, path) : NULL;
                if (at && (size_t)(at - loc) < n)
                        n = (size_t)(at - loc);
                snprintf(it->error, sizeof(it->error),
                         "HTTP %ld: the collector URL %.200s redirects to %.*s; set --collector "
                         "to where it points",
                         code, u->url, loc ? (int)(n < 200 ? n : 200) : 13,
                         loc ? loc : "(no Location)");
        } else if (code == 401 || code == 403) {
                snprintf(it->error, sizeof(it->error),
                         "HTTP %ld: the collector refused the credentials; check %s: %.200s", code,
                         u->cred_source, it->response);
        } else {
                snprintf(it->error, sizeof(it->error),
                         "HTTP %ld from %.200s%s: is --collector the base URL of a %s collector? "
                         "%.200s",
                         code, u->url + u->http[u->cur], path, fp_wire_name(w), it->response);
        }
        return MISCONFIGURED;
}

/* Finished transfers: classify each answer. */
static void check_done(struct fp_uploader *u)
{
        CURLMsg *m;
        int left;

        while ((m = curl_multi_info_read(u->multi, &left))) {
                if (m->msg != CURLMSG_DONE)
                        continue;
                struct item *it = NULL;
                curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&it);
                long code = 0;
                curl_off_t after = 0;
                int64_t rejected = 0;
                char why[256];
                curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
                if (curl_easy_getinfo(m->easy_handle, CURLINFO_RETRY_AFTER, &after) == CURLE_OK &&
                    after > u->round->retry_after)
                        u->round->retry_after = after > BACKOFF_MAX_S ? BACKOFF_MAX_S : (long)after;
                /* OTLP says in a 200 which profiles it could not take: read before it is text. */
                if (u->round->wire == FP_WIRE_OTLP && code >= 200 && code < 300)
                        rejected = fp_wire_otlp_rejected((const uint8_t *)it->response,
                                                         it->response_len, why, sizeof(why));
                else if (u->round->wire == FP_WIRE_OTLP)
                        it->response_len = fp_wire_otlp_status(it->response, it->response_len);
                it->response[it->response_len < sizeof(it->response) ? it->response_len
                                                                     : sizeof(it->response) - 1] =
                    0;
                /* The collector's answer goes into one log line: printable, no newlines. */
                for (char *c = it->response; *c; c++)
                        if ((unsigned char)*c < 0x20 || *c == 0x7f)
                                *c = ' ';
                for (size_t n = strlen(it->response); n > 0 && it->response[n - 1] == ' '; n--)
                        it->response[n - 1] = 0;
                if (m->data.result != CURLE_OK) {
                        if (!it->error[0])
                                snprintf(it->error, sizeof(it->error), "%s",
                                         curl_easy_strerror(m->data.result));
                        it->outcome = TRANSIENT;
                } else {
                        it->outcome = classify(u, it, code);
                }
                if (it->outcome == DELIVERED) {
                        u->st.uploads_ok++;
                        u->st.bytes_sent += it->wire ? it->wire_len : it->up.len;
                        if (rejected > 0) {
                                /* Taken in part: what it refused cannot be sent better. */
                                fp_log(LOG_ERR,
                                       "The collector rejected %" PRId64
                                       " profile%s of %d (%s) for good: %s",
                                       rejected, rejected == 1 ? "" : "s", (int)it->up.pid,
                                       it->up.event, why[0] ? why : "(no reason given)");
                                u->st.uploads_rejected++;
                        }
                } else if (it->outcome == REFUSED) {
                        fp_log(LOG_ERR,
                               "The collector refused the profile of %d (%s, %" PRIu64
                               " samples) for good: %s",
                               (int)it->up.pid, it->up.event, it->up.samples, it->error);
                        u->st.uploads_rejected++;
                }
                curl_multi_remove_handle(u->multi, it->easy);
                curl_easy_cleanup(it->easy);
                it->easy = NULL;
                u->in_flight--;
        }
        if (u->state == SENDING && u->in_flight == 0)
                sending_done(u);
}

static size_t on_response(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct item *it = userdata;
        size_t n = size * nmemb, room = sizeof(it->response) - 1 - it->response_len;
        if (room > 0) {
                size_t take = n < room ? n : room;
                memcpy(it->response + it->response_len, data, take);
                it->response_len += take;
        }
        return n;
}

/* Appends a header line; false when out of memory. */
static bool add_header(struct item *it, const char *fmt, ...)
{
        char *line = NULL;
        va_list ap;

        va_start(ap, fmt);
        int n = vasprintf(&line, fmt, ap);
        va_end(ap);
        if (n < 0)
                return false;
        struct curl_slist *l = curl_slist_append(it->headers, line);
        explicit_bzero(line, (size_t)n);
        free(line);
        if (!l)
                return false;
        it->headers = l;
        return true;
}

/* The request's headers in the round's protocol, with the credentials. */
static bool item_headers(const struct fp_uploader *u, struct item *it)
{
        enum fp_wire w = u->round->wire;
        bool ok = add_header(it, "Expect:");

        if (w == FP_WIRE_NATIVE)
                ok = ok && add_header(it, FP_UPLOAD_KEY_HEADER ": %s", it->up.key) &&
                     add_header(it, "Content-Type: application/octet-stream");
        else if (w == FP_WIRE_PYROSCOPE)
                ok = ok && add_header(it, "Content-Type: application/proto") &&
                     add_header(it, "Connect-Protocol-Version: 1");
        else
                ok = ok && add_header(it, "Content-Type: application/x-protobuf") &&
                     add_header(it, "Content-Encoding: gzip");
        if (u->cred.bearer)
                ok = ok && add_header(it, "Authorization: Bearer %s", u->cred.bearer);
        if (u->cred.tenant)
                ok = ok && add_header(it, "X-Scope-OrgID: %s", u->cred.tenant);
        return ok;
}

static int item_start(struct fp_uploader *u, struct item *it)
{
        const char *base = u->url + u->http[u->cur];
        enum fp_wire w = u->round->wire;
        char *url = NULL;

        it->u = u;
        it->easy = curl_easy_init();
        if (!it->easy)
                return -ENOMEM;
        if ((w == FP_WIRE_NATIVE ? asprintf(&url, "%s%s?%s", base, fp_wire_path(w), it->up.query)
                                 : asprintf(&url, "%s%s", base, fp_wire_path(w))) < 0)
                return -ENOMEM;
        if (!item_headers(u, it)) {
                free(url);
                return -ENOMEM;
        }
        if (u->cred.user) {
                curl_easy_setopt(it->easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
                curl_easy_setopt(it->easy, CURLOPT_USERNAME, u->cred.user);
                curl_easy_setopt(it->easy, CURLOPT_PASSWORD, u->cred.password);
        }
        curl_easy_setopt(it->easy, CURLOPT_URL, url);
        free(url); /* libcurl copies it */
        curl_easy_setopt(it->easy, CURLOPT_POST, 1L);
        curl_easy_setopt(it->easy, CURLOPT_POSTFIELDS, it->wire ? it->wire : it->up.body);
        curl_easy_setopt(it->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(it->wire ? it->wire_len : it->up.len));
        curl_easy_setopt(it->easy, CURLOPT_HTTPHEADER, it->headers);
        curl_easy_setopt(it->easy, CURLOPT_WRITEFUNCTION, on_response);
        curl_easy_setopt(it->easy, CURLOPT_WRITEDATA, it);
        curl_easy_setopt(it->easy, CURLOPT_PRIVATE, it);
        curl_easy_setopt(it->easy, CURLOPT_ERRORBUFFER, it->error);
        curl_easy_setopt(it->easy, CURLOPT_CONNECTTIMEOUT, 5L);
        curl_easy_setopt(it->easy, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(it->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(it->easy, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(it->easy, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(it->easy, CURLOPT_SSL_VERIFYHOST, 2L);
        if (u->ca_file)
                curl_easy_setopt(it->easy, CURLOPT_CAINFO, u->ca_file);
        if (curl_multi_add_handle(u->multi, it->easy) != CURLM_OK)
                return -ENOMEM;
        u->in_flight++;
        return 0;
}

static void on_prepared(void *userdata, const struct fp_writer_result *res)
{
        struct fp_uploader *u = userdata;
        struct round *r = res->arg;
        char msg[300];

        if (u->closing) {
                round_free(r);
                u->round = NULL;
                u->state = IDLE;
                return;
        }
        if (res->error < 0) {
                snprintf(msg, sizeof(msg), "cannot prepare the upload: %.200s", r->error);
                round_end(u, false, false, msg);
                return;
        }
        if (r->n_items == 0) {
                /* Nothing, or buckets without samples (now marked): done with them. */
                u->st.buckets_built += r->buckets_moved;
                round_end(u, true, r->more,
                          r->buckets_moved ? "nothing to upload but drops" : "nothing to upload");
                return;
        }
        u->state = SENDING;
        u->st.last_attempt_ns = (int64_t)fp_now_ns(CLOCK_REALTIME);
        for (size_t i = 0; i < r->n_items; i++) {
                if (r->items[i].outcome == REFUSED) {
                        fp_log(LOG_ERR, "The profile of %d (%s) cannot be sent to %s for good: %s",
                               (int)r->items[i].up.pid, r->items[i].up.event, u->url,
                               r->items[i].error);
                        u->st.uploads_rejected++;
                }
                if (r->items[i].outcome != PENDING)
                        continue;
                int e = item_start(u, &r->items[i]);
                if (e < 0) {
                        snprintf(r->items[i].error, sizeof(r->items[i].error),
                                 "cannot start the request: %s", strerror(-e));
                        r->items[i].outcome = TRANSIENT;
                }
        }
        check_done(u);
}

static void start_round(struct fp_uploader *u)
{
        if (u->state != IDLE)
                return;
        if (!u->round) {
                u->round = calloc(1, sizeof(*u->round));
                if (!u->round) {
                        round_end(u, false, false, "out of memory");
                        return;
                }
        }
        u->state = PREPARING;
        u->round->wire = u->wires[u->cur];
        if (fp_writer_submit_call(u->writer, prepare, u->round, on_prepared, u) < 0)
                round_end(u, false, false, "cannot queue the upload");
}

static void on_round_timer(evutil_socket_t fd, short what, void *arg)
{
        (void)fd;
        (void)what;
        start_round(arg);
}

/* ---- libcurl <-> libevent ---- */

static void on_curl_event(evutil_socket_t fd, short what, void *arg)
{
        struct fp_uploader *u = arg;
        int running, flags = 0;
        if (what & EV_READ)
                flags |= CURL_CSELECT_IN;
        if (what & EV_WRITE)
                flags |= CURL_CSELECT_OUT;
        curl_multi_socket_action(u->multi, fd, flags, &running);
        check_done(u);
}

static int curl_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
        struct fp_uploader *u = userp;
        struct event *ev = socketp;
        (void)easy;

        if (what == CURL_POLL_REMOVE) {
                if (ev)
                        event_free(ev);
                curl_multi_assign(u->multi, s, NULL);
                return 0;
        }
        short kind = EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
                     ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
        if (ev)
                event_free(ev);
        ev = event_new(u->base, s, kind, on_curl_event, u);
        if (!ev)
                return -1;
        event_add(ev, NULL);
        curl_multi_assign(u->multi, s, ev);
        return 0;
}

static void on_curl_timer(evutil_socket_t fd, short what, void *arg)
{
        struct fp_uploader *u = arg;
        int running;
        (void)fd;
        (void)what;
        curl_multi_socket_action(u->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(u);
}

static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        struct fp_uploader *u = userp;
        (void)multi;
        if (timeout_ms < 0) {
                event_del(u->ev_curl_timer);
                return 0;
        }
        struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
        event_add(u->ev_curl_timer, &tv);
        return 0;
}

/* ---- API ---- */

/*
 * --collector URL[,URL...]: each http(s)://, pyroscope+http(s):// or
 * otlp+http(s)://, without trailing slashes.
 */
static int parse_urls(struct fp_uploader *u, const char *list, char *err, size_t err_len)
{
        const char *p = list;

        for (;;) {
                size_t n = strcspn(p, ","), skip = 0;
                enum fp_wire w = FP_WIRE_NATIVE;
                char *url = n ? strndup(p, n) : NULL;
                if (n && !url)
                        return fp_errf(err, err_len, -ENOMEM, "out of memory");
                if (!url || fp_wire_of_url(url, &w, &skip) < 0) {
                        free(url);
                        return fp_errf(err, err_len, -EINVAL,
                                       "collector URL '%.*s' must start with http:// or https://, "
                                       "or pyroscope+ or otlp+ and one of them (give several as "
                                       "URL,URL)",
                                       (int)(n < 300 ? n : 300), p);
                }
                if (u->n_urls == FP_UPLOAD_MAX_URLS) {
                        free(url);
                        return fp_errf(err, err_len, -EINVAL, "at most %d collector URLs",
                                       FP_UPLOAD_MAX_URLS);
                }
                char **v = realloc(u->urls, (u->n_urls + 1) * sizeof(*v));
                if (v)
                        u->urls = v;
                enum fp_wire *ws = v ? realloc(u->wires, (u->n_urls + 1) * sizeof(*ws)) : NULL;
                if (ws)
                        u->wires = ws;
                size_t *hs = ws ? realloc(u->http, (u->n_urls + 1) * sizeof(*hs)) : NULL;
                if (!hs) {
                        free(url);
                        return fp_errf(err, err_len, -ENOMEM, "out of memory");
                }
                u->http = hs;
                while (n > 0 && url[n - 1] == '/')
                        url[--n] = 0;
                u->wires[u->n_urls] = w;
                u->http[u->n_urls] = skip;
                u->urls[u->n_urls++] = url;
                if (!p[n])
                        break;
                p += n + 1;
        }
        u->url = u->urls[0];
        return 0;
}

int fp_uploader_new(struct event_base *base, struct fp_writer *writer,
                    const struct fp_upload_options *opt, struct fp_uploader **ret, char *err,
                    size_t err_len)
{
        struct fp_uploader *u;
        int r;

        u = calloc(1, sizeof(*u));
        if (!u) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        if ((r = parse_urls(u, opt->url, err, err_len)) < 0) {
                fp_uploader_free(u);
                return r;
        }
        u->base = base;
        u->writer = writer;
        u->interval = opt->interval_seconds ? opt->interval_seconds : 60;
        if (opt->ca_file)
                u->ca_file = strdup(opt->ca_file);
        if (opt->token_file && opt->credentials_file) {
                fp_uploader_free(u);
                return fp_errf(err, err_len, -EINVAL,
                               "give --token-file or --credentials-file, not both");
        }
        u->cred_source = opt->credentials_file ? "--credentials-file" : "--token-file";
        if (opt->token_file &&
            (r = fp_read_token_file(opt->token_file, &u->cred.bearer, err, err_len)) < 0) {
                fp_uploader_free(u);
                return r;
        }
        if (opt->credentials_file &&
            (r = fp_wire_read_credentials(opt->credentials_file, &u->cred, err, err_len)) < 0) {
                fp_uploader_free(u);
                return r;
        }
        if (gethostname(u->hostname, sizeof(u->hostname) - 1) < 0)
                snprintf(u->hostname, sizeof(u->hostname), "localhost");
        u->multi = curl_multi_init();
        u->ev_round = event_new(base, -1, 0, on_round_timer, u);
        u->ev_curl_timer = event_new(base, -1, 0, on_curl_timer, u);
        if ((opt->ca_file && !u->ca_file) || !u->multi || !u->ev_round || !u->ev_curl_timer) {
                snprintf(err, err_len, "out of memory");
                fp_uploader_free(u);
                return -ENOMEM;
        }
        curl_multi_setopt(u->multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb);
        curl_multi_setopt(u->multi, CURLMOPT_SOCKETDATA, u);
        curl_multi_setopt(u->multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb);
        curl_multi_setopt(u->multi, CURLMOPT_TIMERDATA, u);
        curl_multi_setopt(u->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 4L);
        srandom((unsigned)((int64_t)fp_now_ns(CLOCK_REALTIME) ^ getpid()));
        arm(u, u->interval * jitter(0.1));
        *ret = u;
        return 0;
}

void fp_uploader_close(struct fp_uploader *u)
{
        if (!u)
                return;
        u->closing = true;
        if (u->ev_round)
                event_del(u->ev_round);
        if (u->state == SENDING) {
                /* Abandon the requests; the buckets stay pending for the next start. */
                round_free(u->round);
                u->round = NULL;
                u->state = IDLE;
        }
        if (u->flush_done) {
                fp_upload_done_fn done = u->flush_done;
                u->flush_done = NULL;
                done(u->flush_userdata, false, "the agent is shutting down");
        }
}

void fp_uploader_free(struct fp_uploader *u)
{
        if (!u)
                return;
        fp_uploader_close(u);
        if (u->state == IDLE) {
                round_free(u->round);
                u->round = NULL;
        }
        if (u->multi)
                curl_multi_cleanup(u->multi);
        if (u->ev_round)
                event_free(u->ev_round);
        if (u->ev_curl_timer)
                event_free(u->ev_curl_timer);
        for (size_t i = 0; i < u->n_urls; i++)
                free(u->urls[i]);
        free(u->urls);
        free(u->wires);
        free(u->http);
        fp_wire_credentials_clear(&u->cred);
        free(u->ca_file);
        free(u);
}

int fp_uploader_flush(struct fp_uploader *u, fp_upload_done_fn done, void *userdata)
{
        if (u->flush_done)
                return -EBUSY;
        u->flush_done = done;
        u->flush_userdata = userdata;
        if (u->state == IDLE) {
                event_del(u->ev_round);
                start_round(u);
        } else {
                u->flush_again = true;
        }
        return 0;
}

void fp_uploader_status(const struct fp_uploader *u, struct fp_upload_status *ret)
{
        *ret = u->st;
        ret->in_progress = u->state != IDLE;
}

const char *fp_uploader_url(const struct fp_uploader *u)
{
        return u->url;
}

size_t fp_uploader_n_urls(const struct fp_uploader *u)
{
        return u->n_urls;
}
