/* SPDX-License-Identifier: MIT */
/*
 * Store-and-forward upload; see upload.h for the round and its rules.
 *
 * State machine of the uploader (loop thread):
 *
 *   IDLE --timer or flush--> PREPARING (writer thread builds the items)
 *   PREPARING --items--> SENDING (libcurl multi, one easy handle per item)
 *   SENDING --all answered--> MARKING (writer thread marks the buckets) --> IDLE
 *   SENDING --a retryable failure--> IDLE, with the same bucket set kept
 *                                    for the next try, after a backoff
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

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BUCKETS_PER_ROUND 64
#define BACKOFF_MIN_S         1
#define BACKOFF_MAX_S         300

enum state {
        IDLE,
        PREPARING,
        SENDING,
        MARKING,
};

/* One POST: a (target, event) over the round's buckets. */
struct item {
        struct fp_uploader *u;
        pid_t pid;
        uint64_t starttime;
        char *comm, *exe, *event, *host;
        struct fp_upload_drop *drops; /* what the series lost over the round's range */
        size_t n_drops;
        uint8_t *body;
        size_t len;
        uint64_t samples;
        bool counter; /* a counter of the target's group: drops go with its sampling event */
        char key[40];
        CURL *easy;
        struct curl_slist *headers;
        char error[CURL_ERROR_SIZE];
        char response[512];
        size_t response_len;
        int outcome; /* 0 pending, 1 ok, 2 rejected, 3 retry */
};

/* Work shared with the writer thread: owned by the round's job while it runs. */
struct round {
        int64_t ids[MAX_BUCKETS_PER_ROUND];
        size_t n_ids;
        bool fixed; /* retry: keep exactly these ids */
        bool more;  /* more buckets were pending than one round takes */
        int64_t from_ns, to_ns;
        struct item *items;
        size_t n_items, cap_items;
        char error[256];
};

struct fp_uploader {
        struct event_base *base;
        struct fp_writer *writer;
        char *url, *token, *ca_file;
        unsigned interval;
        fp_upload_reject_fn reject;
        void *userdata;

        enum state state;
        struct round *round; /* the current or retried round */
        struct event *ev_round;
        CURLM *multi;
        struct event *ev_curl_timer;
        size_t in_flight;
        unsigned backoff_s;
        char hostname[256];

        fp_upload_done_fn flush_done;
        void *flush_userdata;
        bool flush_requested;
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
        free(it->comm);
        free(it->exe);
        free(it->event);
        free(it->drops);
        free(it->host);
        free(it->body);
        memset(it, 0, sizeof(*it));
}

static void round_free(struct round *r)
{
        if (!r)
                return;
        for (size_t i = 0; i < r->n_items; i++)
                item_clear(&r->items[i]);
        free(r->items);
        free(r);
}

/* Drops the items of a round but keeps its bucket set (for a retry). */
static void round_reset_items(struct round *r)
{
        for (size_t i = 0; i < r->n_items; i++)
                item_clear(&r->items[i]);
        r->n_items = 0;
        r->error[0] = 0;
}

/* ---- writer thread: build the items, mark the buckets ---- */

struct series_acc {
        struct round *r;
        struct fp_store *store;
        int err;
};

/* Sums a stored drop row into the item's drops (reasons past the contract's cap: "other"). */
static int add_drop(void *userdata, const struct fp_store_drop *d)
{
        struct item *it = userdata;
        size_t i;

        for (i = 0; i < it->n_drops; i++)
                if (strcmp(it->drops[i].reason, d->reason) == 0)
                        break;
        if (i == it->n_drops) {
                if (!it->drops) {
                        it->drops = calloc(FP_UPLOAD_MAX_DROPS, sizeof(*it->drops));
                        if (!it->drops)
                                return -ENOMEM;
                }
                if (it->n_drops == FP_UPLOAD_MAX_DROPS) {
                        i = FP_UPLOAD_MAX_DROPS - 1;
                        snprintf(it->drops[i].reason, sizeof(it->drops[i].reason), "other");
                } else {
                        it->n_drops++;
                        snprintf(it->drops[i].reason, sizeof(it->drops[i].reason), "%s", d->reason);
                }
        }
        it->drops[i].count += d->count;
        return 0;
}

static void key_of(const struct round *r, const char *host, pid_t pid, uint64_t starttime,
                   const char *event, char out[40])
{
        /* Two independent 64-bit FNV-1a hashes: a 128-bit key, stable across retries. */
        uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
        char buf[512];
        int n =
            snprintf(buf, sizeof(buf), "%s|%d|%" PRIu64 "|%s", host, (int)pid, starttime, event);
        for (int i = 0; i < n && i < (int)sizeof(buf); i++) {
                h1 = (h1 ^ (uint8_t)buf[i]) * 0x100000001b3ULL;
                h2 = (h2 ^ (uint8_t)buf[i]) * 0x100000001b3ULL + 7;
        }
        for (size_t i = 0; i < r->n_ids; i++)
                for (int b = 0; b < 8; b++) {
                        uint8_t c = (uint8_t)((uint64_t)r->ids[i] >> (8 * b));
                        h1 = (h1 ^ c) * 0x100000001b3ULL;
                        h2 = (h2 ^ c) * 0x100000001b3ULL + 7;
                }
        snprintf(out, 40, "%016" PRIx64 "%016" PRIx64, h1, h2);
}

static int build_item(void *userdata, const struct fp_store_series *se)
{
        struct series_acc *a = userdata;
        struct round *r = a->r;
        struct fp_store_filter f = {.pid = se->pid,
                                    .starttime = se->starttime,
                                    .event = se->event,
                                    .bucket_min = r->ids[0],
                                    .bucket_max = r->ids[r->n_ids - 1]};
        struct fp_pprof *p = fp_pprof_new();
        struct item it = {0};
        int e;

        if (!p)
                return -ENOMEM;
        e = fp_store_query_pprof(a->store, &f, p);
        if (e <= 0) {
                fp_pprof_free(p);
                return e; /* nothing to send for it */
        }
        it.samples = (uint64_t)fp_pprof_total(p, 0);
        e = fp_pprof_encode(p, 1, &it.body, &it.len);
        fp_pprof_free(p);
        if (e < 0)
                return e;
        /*
         * A counter of a group (config "event=LEADER,COUNTER,...") shares the
         * samples of its leader: the target's drops travel with the leader's
         * profile only, so the collector counts them once.
         */
        char leader[FP_PERF_EVENT_NAME_MAX + 1];
        fp_targetconf_event(se->config, 0, leader, sizeof(leader));
        it.counter = leader[0] && strcmp(leader, se->event) != 0;
        if (!it.counter)
                (void)fp_store_drop_totals(a->store, &f, add_drop, &it);
        it.pid = se->pid;
        it.starttime = se->starttime;
        it.comm = strdup(se->comm ? se->comm : "");
        it.exe = strdup(se->exe ? se->exe : "");
        it.event = strdup(se->event);
        it.host = strdup(se->host ? se->host : "");
        if (!it.comm || !it.exe || !it.event || !it.host) {
                item_clear(&it);
                return -ENOMEM;
        }
        key_of(r, it.host, it.pid, it.starttime, it.event, it.key);
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

/* Writer thread: picks the buckets (or keeps a retry's) and builds one item per series. */
static int prepare(struct fp_store *store, void *arg)
{
        struct round *r = arg;
        struct fp_store_bucket b[MAX_BUCKETS_PER_ROUND + 1];
        size_t n_kept = 0;
        int n;

        if (!store) {
                snprintf(r->error, sizeof(r->error), "the store is unavailable");
                return -ENODEV;
        }
        n = fp_store_pending_uploads(store, b, MAX_BUCKETS_PER_ROUND + 1);
        if (n < 0) {
                snprintf(r->error, sizeof(r->error), "%s", fp_store_errmsg(store));
                return n;
        }
        r->more = n > MAX_BUCKETS_PER_ROUND;
        if (r->more)
                n = MAX_BUCKETS_PER_ROUND;
        if (r->fixed) {
                /* A retry sends the same buckets (those still pending), so keys repeat. */
                for (size_t i = 0; i < r->n_ids; i++)
                        for (int j = 0; j < n; j++)
                                if (b[j].id == r->ids[i]) {
                                        r->ids[n_kept++] = r->ids[i];
                                        break;
                                }
                r->n_ids = n_kept;
        } else {
                for (int j = 0; j < n; j++)
                        r->ids[j] = b[j].id;
                r->n_ids = (size_t)n;
        }
        r->from_ns = r->to_ns = 0;
        for (int j = 0; j < n; j++)
                for (size_t i = 0; i < r->n_ids; i++)
                        if (b[j].id == r->ids[i]) {
                                if (!r->from_ns || b[j].start_ns < r->from_ns)
                                        r->from_ns = b[j].start_ns;
                                if (b[j].start_ns + b[j].length_ns > r->to_ns)
                                        r->to_ns = b[j].start_ns + b[j].length_ns;
                        }
        if (r->n_ids == 0)
                return 0;
        struct series_acc a = {.r = r, .store = store};
        struct fp_store_filter f = {.bucket_min = r->ids[0], .bucket_max = r->ids[r->n_ids - 1]};
        n = fp_store_list_series(store, &f, build_item, &a);
        if (n < 0) {
                snprintf(r->error, sizeof(r->error), "cannot read the store: %s",
                         fp_store_errmsg(store));
                return n;
        }
        return 0;
}

static int mark(struct fp_store *store, void *arg)
{
        struct round *r = arg;
        if (!store)
                return -ENODEV;
        int n = fp_store_mark_uploaded(store, r->ids, r->n_ids);
        if (n < 0)
                snprintf(r->error, sizeof(r->error), "%s", fp_store_errmsg(store));
        return n < 0 ? n : 0;
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

static void round_end(struct fp_uploader *u, bool ok, const char *message)
{
        u->state = IDLE;
        if (ok) {
                u->st.rounds_ok++;
                u->backoff_s = 0;
                u->st.last_error[0] = 0;
                round_free(u->round);
                u->round = NULL;
        } else {
                u->st.rounds_failed++;
                snprintf(u->st.last_error, sizeof(u->st.last_error), "%s", message);
                u->backoff_s = u->backoff_s ? u->backoff_s * 2 : BACKOFF_MIN_S;
                if (u->backoff_s > BACKOFF_MAX_S)
                        u->backoff_s = BACKOFF_MAX_S;
                if (u->round)
                        round_reset_items(u->round);
        }
        if (u->flush_again) {
                /* A flush came while this round ran: one more, with the newest buckets. */
                u->flush_again = false;
                start_round(u);
                return;
        }
        if (u->flush_done) {
                fp_upload_done_fn done = u->flush_done;
                u->flush_done = NULL;
                done(u->flush_userdata, ok, message);
        }
        u->flush_requested = false;
        if (!ok)
                arm(u, u->backoff_s * jitter(0.25));
        else
                arm(u, u->interval * jitter(0.1));
}

static void on_marked(void *userdata, const struct fp_writer_result *res)
{
        struct fp_uploader *u = userdata;
        struct round *r = res->arg;
        char msg[256];

        if (u->closing) {
                round_free(r);
                u->round = NULL;
                u->state = IDLE;
                return;
        }
        if (res->error < 0) {
                snprintf(msg, sizeof(msg), "cannot mark buckets uploaded: %.200s", r->error);
                round_end(u, false, msg);
                return;
        }
        u->st.buckets_uploaded += r->n_ids;
        u->st.last_success_ns = (int64_t)fp_now_ns(CLOCK_REALTIME);
        size_t sent = 0, rejected = 0;
        for (size_t i = 0; i < r->n_items; i++) {
                sent += r->items[i].outcome == 1;
                rejected += r->items[i].outcome == 2;
        }
        snprintf(msg, sizeof(msg), "uploaded %zu profile%s (%zu bucket%s) to %s%s", sent,
                 sent == 1 ? "" : "s", r->n_ids, r->n_ids == 1 ? "" : "s", u->url,
                 rejected ? "; some were refused, see the log" : "");
        bool more = r->more;
        round_end(u, true, msg);
        if (more)
                arm(u, 0.05); /* catch up: the store holds more than one round */
}

static void sending_done(struct fp_uploader *u)
{
        struct round *r = u->round;
        size_t retry = 0;
        const char *why = NULL;

        for (size_t i = 0; i < r->n_items; i++)
                if (r->items[i].outcome == 3) {
                        retry++;
                        if (!why)
                                why = r->items[i].error;
                }
        if (retry) {
                /* The URL is the operator's and may be long: the message is cut,
                 * not the buffer overrun, and the log line keeps the reason. */
                char msg[600];
                snprintf(msg, sizeof(msg), "upload to %.200s failed (%zu of %zu): %.255s; retrying",
                         u->url, retry, r->n_items, why);
                fp_log(LOG_ERR, "%s", msg);
                round_end(u, false, msg);
                return;
        }
        u->state = MARKING;
        if (fp_writer_submit_call(u->writer, mark, r, on_marked, u) < 0)
                round_end(u, false, "cannot queue the marking of uploaded buckets");
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
                curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
                it->response[it->response_len < sizeof(it->response) ? it->response_len
                                                                     : sizeof(it->response) - 1] =
                    0;
                if (m->data.result != CURLE_OK) {
                        if (!it->error[0])
                                snprintf(it->error, sizeof(it->error), "%s",
                                         curl_easy_strerror(m->data.result));
                        it->outcome = 3;
                } else if (code >= 200 && code < 300) {
                        it->outcome = 1;
                        u->st.uploads_ok++;
                        u->st.bytes_sent += it->len;
                } else if (code == 408 || code == 429 || code == 401 || code == 403 ||
                           code >= 500) {
                        snprintf(it->error, sizeof(it->error), "HTTP %ld: %.200s", code,
                                 it->response);
                        it->outcome = 3;
                } else {
                        /* Refused for good: log once, count its samples, never resend. */
                        snprintf(it->error, sizeof(it->error), "HTTP %ld: %.200s", code,
                                 it->response);
                        fp_log(LOG_ERR,
                               "The collector refused the profile of %d (%s, %" PRIu64
                               " samples): %s",
                               (int)it->pid, it->event, it->samples, it->error);
                        it->outcome = 2;
                        u->st.uploads_rejected++;
                        if (u->reject && !it->counter) /* its samples are its leader's */
                                u->reject(u->userdata, it->pid, it->starttime, it->samples);
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

/* The item's upload URL: the collector's, the contract's path and query. */
static int item_url(const struct fp_uploader *u, const struct round *r, const struct item *it,
                    char **ret)
{
        struct fp_upload_meta *m = calloc(1, sizeof(*m));
        char *query = NULL;
        int e;

        if (!m)
                return -ENOMEM;
        snprintf(m->host, sizeof(m->host), "%s", it->host);
        m->pid = it->pid;
        m->starttime = it->starttime;
        snprintf(m->comm, sizeof(m->comm), "%s", it->comm);
        snprintf(m->exe, sizeof(m->exe), "%s", it->exe);
        snprintf(m->event, sizeof(m->event), "%s", it->event);
        snprintf(m->agent, sizeof(m->agent), "%s", FP_VERSION);
        m->from_ns = r->from_ns;
        m->to_ns = r->to_ns;
        m->n_drops = it->n_drops;
        for (size_t i = 0; i < it->n_drops; i++)
                m->drops[i] = it->drops[i];
        e = fp_upload_encode_query(m, &query);
        free(m);
        if (e < 0)
                return e;
        e = asprintf(ret, "%s%s?%s", u->url, FP_UPLOAD_PATH, query) < 0 ? -ENOMEM : 0;
        free(query);
        return e;
}

static int item_start(struct fp_uploader *u, struct round *r, struct item *it)
{
        char *url = NULL, hdr[300];
        int e = 0;

        it->u = u;
        it->easy = curl_easy_init();
        if (!it->easy)
                return -ENOMEM;
        if ((e = item_url(u, r, it, &url)) < 0)
                return e;
        snprintf(hdr, sizeof(hdr), FP_UPLOAD_KEY_HEADER ": %s", it->key);
        it->headers = curl_slist_append(it->headers, hdr);
        it->headers = curl_slist_append(it->headers, "Content-Type: application/octet-stream");
        it->headers = curl_slist_append(it->headers, "Expect:");
        if (u->token) {
                char *auth = NULL;
                if (asprintf(&auth, "Authorization: Bearer %s", u->token) < 0) {
                        free(url);
                        return -ENOMEM;
                }
                it->headers = curl_slist_append(it->headers, auth);
                free(auth);
        }
        curl_easy_setopt(it->easy, CURLOPT_URL, url);
        free(url); /* libcurl copies it */
        curl_easy_setopt(it->easy, CURLOPT_POST, 1L);
        curl_easy_setopt(it->easy, CURLOPT_POSTFIELDS, it->body);
        curl_easy_setopt(it->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
        curl_easy_setopt(it->easy, CURLOPT_HTTPHEADER, it->headers);
        curl_easy_setopt(it->easy, CURLOPT_WRITEFUNCTION, on_response);
        curl_easy_setopt(it->easy, CURLOPT_WRITEDATA, it);
        curl_easy_setopt(it->easy, CURLOPT_PRIVATE, it);
        curl_easy_setopt(it->easy, CURLOPT_ERRORBUFFER, it->error);
        curl_easy_setopt(it->easy, CURLOPT_CONNECTTIMEOUT, 5L);
        curl_easy_setopt(it->easy, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(it->easy, CURLOPT_NOSIGNAL, 1L);
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
                round_end(u, false, msg);
                return;
        }
        if (r->n_ids == 0) {
                round_end(u, true, "nothing to upload");
                return;
        }
        if (r->n_items == 0) {
                /* Buckets without samples (only drops, or emptied): done with them. */
                u->state = MARKING;
                if (fp_writer_submit_call(u->writer, mark, r, on_marked, u) < 0)
                        round_end(u, false, "cannot queue the marking of uploaded buckets");
                return;
        }
        u->state = SENDING;
        u->st.last_attempt_ns = (int64_t)fp_now_ns(CLOCK_REALTIME);
        r->fixed = true; /* from here on, a retry resends exactly these buckets */
        for (size_t i = 0; i < r->n_items; i++) {
                int e = item_start(u, r, &r->items[i]);
                if (e < 0) {
                        snprintf(r->items[i].error, sizeof(r->items[i].error),
                                 "cannot start the request: %s", strerror(-e));
                        r->items[i].outcome = 3;
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
                        round_end(u, false, "out of memory");
                        return;
                }
        }
        u->state = PREPARING;
        if (fp_writer_submit_call(u->writer, prepare, u->round, on_prepared, u) < 0)
                round_end(u, false, "cannot queue the upload");
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

int fp_uploader_new(struct event_base *base, struct fp_writer *writer,
                    const struct fp_upload_options *opt, fp_upload_reject_fn reject, void *userdata,
                    struct fp_uploader **ret, char *err, size_t err_len)
{
        struct fp_uploader *u;
        int r;

        if (strncmp(opt->url, "http://", 7) != 0 && strncmp(opt->url, "https://", 8) != 0) {
                snprintf(err, err_len, "collector URL '%s' must start with http:// or https://",
                         opt->url);
                return -EINVAL;
        }
        u = calloc(1, sizeof(*u));
        if (!u) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        u->base = base;
        u->writer = writer;
        u->reject = reject;
        u->userdata = userdata;
        u->interval = opt->interval_seconds ? opt->interval_seconds : 60;
        u->url = strdup(opt->url);
        if (u->url) {
                size_t n = strlen(u->url);
                while (n > 0 && u->url[n - 1] == '/')
                        u->url[--n] = 0;
        }
        if (opt->ca_file)
                u->ca_file = strdup(opt->ca_file);
        if (opt->token_file &&
            (r = fp_read_token_file(opt->token_file, &u->token, err, err_len)) < 0) {
                fp_uploader_free(u);
                return r;
        }
        if (gethostname(u->hostname, sizeof(u->hostname) - 1) < 0)
                snprintf(u->hostname, sizeof(u->hostname), "localhost");
        u->multi = curl_multi_init();
        u->ev_round = event_new(base, -1, 0, on_round_timer, u);
        u->ev_curl_timer = event_new(base, -1, 0, on_curl_timer, u);
        if (!u->url || (opt->ca_file && !u->ca_file) || !u->multi || !u->ev_round ||
            !u->ev_curl_timer) {
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
        free(u->url);
        free(u->token);
        free(u->ca_file);
        free(u);
}

int fp_uploader_flush(struct fp_uploader *u, fp_upload_done_fn done, void *userdata)
{
        if (u->flush_done)
                return -EBUSY;
        u->flush_done = done;
        u->flush_userdata = userdata;
        u->flush_requested = true;
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
