/* SPDX-License-Identifier: MIT */
/*
 * The other protocols' shared parts; see foreign.h.
 */
#include "foreign.h"
#include "escape.h"
#include "gate.h"
#include "http.h"
#include "log.h"
#include "pbwire.h"
#include "store.h"
#include "upload_contract.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- labels ---- */

static bool label_name_ok(const char *s, size_t n)
{
        if (n == 0 || n > FP_COLL_MAX_LABEL_NAME)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
                        return false;
        return true;
}

static bool label_value_ok(const char *s, size_t n)
{
        if (n > FP_COLL_MAX_LABEL_VALUE)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

int fp_coll_labels_put(struct fp_coll_labels *sr, const char *name, size_t nlen, const char *value,
                       size_t vlen, char *err, size_t errlen)
{
        size_t i;

        if (!label_name_ok(name, nlen))
                return fp_errf(err, errlen, -EINVAL,
                               "label name '%.*s' must be 1 to %d letters, digits, '_', '.' or "
                               "'-'",
                               (int)(nlen > 64 ? 64 : nlen), name, FP_COLL_MAX_LABEL_NAME);
        if (!label_value_ok(value, vlen))
                return fp_errf(err, errlen, -EINVAL,
                               "label %.*s: its value must be at most %d printable characters",
                               (int)nlen, name, FP_COLL_MAX_LABEL_VALUE);
        for (i = 0; i < sr->n; i++)
                if (strlen(sr->labels[i].name) == nlen && !memcmp(sr->labels[i].name, name, nlen))
                        break;
        if (i == sr->n) {
                if (sr->n == FP_COLL_MAX_LABELS)
                        return fp_errf(err, errlen, -EINVAL, "more than %d labels",
                                       FP_COLL_MAX_LABELS);
                sr->n++;
        }
        snprintf(sr->labels[i].name, sizeof(sr->labels[i].name), "%.*s", (int)nlen, name);
        snprintf(sr->labels[i].value, sizeof(sr->labels[i].value), "%.*s", (int)vlen, value);
        return 0;
}

const char *fp_coll_labels_get(const struct fp_coll_labels *sr, const char *name)
{
        for (size_t i = 0; i < sr->n; i++)
                if (strcmp(sr->labels[i].name, name) == 0)
                        return sr->labels[i].value;
        return NULL;
}

/* The first of names that is a label, or NULL. */
static const char *label_any(const struct fp_coll_labels *sr, const char *const *names)
{
        for (; *names; names++) {
                const char *v = fp_coll_labels_get(sr, *names);
                if (v && *v)
                        return v;
        }
        return NULL;
}

static const char *const host_labels[] = {"hostname", "host.name", "host", NULL};
static const char *const pid_labels[] = {"pid", "process.pid", NULL};
static const char *const exe_labels[] = {"process.executable.path", "process.executable.name",
                                         NULL};
static const char *const comm_labels[] = {"process", "process.executable.name", NULL};
static const char *const container_labels[] = {"container.id", "container_id", NULL};

/* Whether a label is a series field above, or Pyroscope's own: not kept as a tag. */
static bool label_mapped(const char *name)
{
        static const char *const *lists[] = {host_labels, pid_labels, exe_labels, comm_labels,
                                             container_labels};
        if (strncmp(name, "__", 2) == 0 || strcmp(name, "service_name") == 0 ||
            strcmp(name, "service.name") == 0)
                return true;
        for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
                for (const char *const *n = lists[i]; *n; n++)
                        if (strcmp(name, *n) == 0)
                                return true;
        return false;
}

static int label_cmp(const void *a, const void *b)
{
        return strcmp(((const struct fp_coll_label *)a)->name,
                      ((const struct fp_coll_label *)b)->name);
}

/* ---- the target of a series ---- */

/* Copies s into out (len bytes), each character not allowed in a service name as '_'. */
static void service_of(const char *s, char *out, size_t len)
{
        size_t n = 0;

        for (; *s && n + 1 < len && n < FP_UPLOAD_MAX_SERVICE; s++)
                out[n++] = isalnum((unsigned char)*s) || strchr(".-_@:", *s) ? *s : '_';
        out[n] = 0;
}

struct fstr {
        char *buf;
        size_t len;
        FILE *f;
};

/*
 * Host, pid, executable and container from the labels, the rest of them
 * (sorted) in the text and the key.
 */
int fp_coll_labels_target(const struct fp_coll_labels *sr, const char *origin, const char *peer,
                          struct fp_store_batch *b, uint32_t *ret, char *err, size_t errlen)
{
        static const char *const service_labels[] = {"service_name", "service.name", NULL};
        const char *app = label_any(sr, service_labels);
        const char *host = label_any(sr, host_labels), *pid_s = label_any(sr, pid_labels);
        const char *exe = label_any(sr, exe_labels), *cont = label_any(sr, container_labels);
        const char *comm = label_any(sr, comm_labels);
        char service[FP_UPLOAD_MAX_SERVICE + 1], container[FP_UPLOAD_MAX_CONTAINER + 1] = "";
        struct fp_coll_label sorted[FP_COLL_MAX_LABELS];
        struct fstr text = {0};
        long pid = 0;
        int r;

        if (!app || !*app)
                return fp_errf(err, errlen, -EINVAL,
                               "a series needs a service_name (or service.name) label: the "
                               "application's name");
        service_of(app, service, sizeof(service));
        if (pid_s) {
                char *end;
                errno = 0;
                pid = strtol(pid_s, &end, 10);
                if (errno || *end || pid < 0 || pid > INT32_MAX)
                        pid = 0; /* not a process ID: kept as a label below */
        }
        if (cont) {
                /* The short form docker shows, when it is an ID at all. */
                size_t n = strspn(cont, "0123456789abcdef");
                if (n >= 12 && !cont[n])
                        snprintf(container, sizeof(container), "%.12s", cont);
        }
        if (!(text.f = open_memstream(&text.buf, &text.len)))
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        fprintf(text.f, "%s", origin);
        memcpy(sorted, sr->labels, sr->n * sizeof(*sorted));
        qsort(sorted, sr->n, sizeof(*sorted), label_cmp);
        for (size_t i = 0; i < sr->n; i++) {
                const char *n = sorted[i].name;
                /* Kept all the same: a name the service could not hold, a pid that is none. */
                bool keep = (fp_coll_labels_get(sr, n) == app && strcmp(service, app) != 0) ||
                            (pid_s && !pid && strcmp(n, "pid") == 0);
                if (label_mapped(n) && !keep)
                        continue;
                fprintf(text.f, " %s=", sorted[i].name);
                fp_escape_url(fp_write_file, text.f, sorted[i].value);
        }
        if (fclose(text.f) != 0 || !text.buf) {
                free(text.buf);
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        }
        /* The key: the agent's host series key of (service, executable + labels, container). */
        size_t kl = strlen(exe ? exe : "") + text.len + 2;
        char *key = malloc(kl);
        if (!key) {
                free(text.buf);
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        }
        snprintf(key, kl, "%s\n%s", exe ? exe : "", text.buf);
        struct fp_store_target t = {.host = host ? host : peer,
                                    .pid = (pid_t)pid,
                                    .starttime = fp_upload_host_series_key(service, key, container),
                                    .comm = comm ? comm : service,
                                    .exe = exe ? exe : "",
                                    .config = text.buf,
                                    .service = service,
                                    .container = container};
        r = fp_store_batch_add_target(b, &t, ret);
        free(key);
        free(text.buf);
        if (r < 0)
                return fp_errf(err, errlen, r, "cannot add a series: %s", strerror(-r));
        return 0;
}

bool fp_coll_drop_of(const char *text, char reason[64], uint64_t *count)
{
        static const char prefix[] = FP_UPLOAD_DROP_PREFIX;
        const char *r = text + sizeof(prefix) - 1;
        size_t n;

        if (strncmp(text, prefix, sizeof(prefix) - 1) != 0)
                return false;
        n = strspn(r, "abcdefghijklmnopqrstuvwxyz0123456789_");
        if (n == 0 || n > 63)
                return false;
        if (count) {
                /* A comment says its count: "=N". */
                char *end;
                if (r[n] != '=' || !isdigit((unsigned char)r[n + 1]))
                        return false;
                errno = 0;
                unsigned long long v = strtoull(r + n + 1, &end, 10);
                if (errno || *end)
                        return false;
                *count = v;
        } else if (r[n]) {
                return false;
        }
        memcpy(reason, r, n);
        reason[n] = 0;
        return true;
}

bool fp_coll_event_name_ok(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > 127)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && !strchr("_-.:", s[i]))
                        return false;
        return true;
}

/* ---- queueing and answering ---- */

/* A push queued for the decoder thread, answered when its group is written. */
struct pending {
        struct fp_coll_server *s;
        struct evhttp_request *req; /* NULL: the client hung up */
        struct evhttp_connection *evcon;
        enum fp_coll_answer how;
        char peer[64];
};

static void on_conn_closed(void *arg)
{
        struct pending *pd = arg;

        pd->req = NULL;
        pd->evcon = NULL;
}

/* Connect's error codes by HTTP status. */
static void connect_error(struct evhttp_request *req, int status, const char *msg)
{
        fp_coll_connect_reply(req, status, fp_coll_connect_code(status), msg);
}

/*
 * OTLP/HTTP's error: a google.rpc.Status{code = 1, message = 2} in
 * protobuf, or in JSON for a JSON request.
 */
static void otlp_error(struct evhttp_request *req, int status, const char *msg, bool json)
{
        /* gRPC codes: INVALID_ARGUMENT 3, RESOURCE_EXHAUSTED 8, UNAUTHENTICATED 16, UNAVAILABLE 14.
         */
        int code = status == 401   ? 16
                   : status == 413 ? 8
                   : status == 503 ? 14
                   : status >= 500 ? 13
                                   : 3;
        struct pbout o = {0};
        struct evbuffer *b = evbuffer_new();

        if (json && b) {
                evbuffer_add_printf(b, "{\"code\":%d,\"message\":", code);
                fp_escape_json_evb(b, msg);
                evbuffer_add_printf(b, "}\n");
                fp_coll_reply(req, status, "application/json", b);
                evbuffer_free(b);
                return;
        }

        out_varint(&o, 1 << 3 | WT_VARINT);
        out_varint(&o, (uint64_t)code);
        out_len(&o, 2, msg, strlen(msg));
        if (!b || o.oom) {
                free(o.buf);
                if (b)
                        evbuffer_free(b);
                return fp_coll_reply_error(req, status, "%s", msg);
        }
        evbuffer_add(b, o.buf, o.len);
        free(o.buf);
        fp_coll_reply(req, status, "application/x-protobuf", b);
        evbuffer_free(b);
}

void fp_coll_foreign_error(struct evhttp_request *req, enum fp_coll_answer how, int status,
                           const char *msg)
{
        if (how == FP_COLL_ANSWER_CONNECT || how == FP_COLL_ANSWER_CONNECT_JSON)
                connect_error(req, status, msg);
        else if (how == FP_COLL_ANSWER_OTLP || how == FP_COLL_ANSWER_OTLP_JSON)
                otlp_error(req, status, msg, how == FP_COLL_ANSWER_OTLP_JSON);
        else
                fp_coll_reply_error(req, status, "%s", msg);
}

static void reply_error(const struct pending *pd, int status, const char *msg)
{
        fp_coll_foreign_error(pd->req, pd->how, status, msg);
}

static void on_pushed(void *userdata, const struct fp_coll_writeq_result *res)
{
        struct pending *pd = userdata;
        struct fp_coll_server *s = pd->s;
        struct evbuffer *b;
        char msg[320];

        fp_coll_count_upload(&s->st, res);
        if (res->decode_status)
                fp_log(LOG_ERR, "Refused a %s push from %s: %s",
                       pd->how == FP_COLL_ANSWER_OTLP || pd->how == FP_COLL_ANSWER_OTLP_JSON
                           ? "OpenTelemetry"
                           : "Pyroscope",
                       pd->peer, res->error);
        fp_coll_writeq_stats(s->writeq, &s->st.store_ns, &s->st.groups);
        if (!pd->req)
                goto out;
        fp_coll_gate_on_close(s->gate, pd->evcon, NULL, NULL);
        if (res->decode_status) {
                reply_error(pd, res->decode_status, res->error);
                goto out;
        }
        if (res->result < 0 && res->result != -EALREADY) {
                snprintf(msg, sizeof(msg), "cannot store the profile now: %s",
                         strerror(-res->result));
                reply_error(pd, 503, msg);
                goto out;
        }
        if (!(b = evbuffer_new())) {
                reply_error(pd, 503, "out of memory");
                goto out;
        }
        /*
         * Connect's PushResponse and OTLP's ExportProfilesServiceResponse
         * (no partial success: all was stored) are empty messages;
         * Pyroscope's ingest answers nothing.
         */
        if (pd->how == FP_COLL_ANSWER_CONNECT_JSON ||
            (pd->how == FP_COLL_ANSWER_OTLP_JSON && !(res->error[0] && res->result == 0)))
                evbuffer_add_printf(b, "{}");
        if (pd->how == FP_COLL_ANSWER_OTLP_JSON && res->error[0] && res->result == 0) {
                /* As below, in the JSON mapping (an int64 is a string). */
                evbuffer_add_printf(b,
                                    "{\"partialSuccess\":{\"rejectedProfiles\":\"%llu\","
                                    "\"errorMessage\":",
                                    strtoull(res->error, NULL, 10));
                fp_escape_json_evb(b, res->error);
                evbuffer_add_printf(b, "}}");
        }
        if (pd->how == FP_COLL_ANSWER_OTLP && res->error[0] && res->result == 0) {
                /*
                 * Stored, but not all of it: partial_success (1) with
                 * rejected_profiles (1) and error_message (2), the decoder's
                 * "N of M profiles rejected: why".
                 */
                struct pbout part = {0}, o = {0};
                out_varint(&part, 1 << 3 | WT_VARINT);
                out_varint(&part, strtoull(res->error, NULL, 10));
                out_len(&part, 2, res->error, strlen(res->error));
                out_len(&o, 1, part.buf, part.len);
                if (!part.oom && !o.oom)
                        evbuffer_add(b, o.buf, o.len);
                free(part.buf);
                free(o.buf);
        }
        fp_coll_reply(pd->req, 200,
                      pd->how == FP_COLL_ANSWER_CONNECT_JSON || pd->how == FP_COLL_ANSWER_OTLP_JSON
                          ? "application/json"
                      : pd->how == FP_COLL_ANSWER_CONNECT ? "application/proto"
                      : pd->how == FP_COLL_ANSWER_OTLP    ? "application/x-protobuf"
                                                          : "text/plain",
                      b);
        evbuffer_free(b);
out:
        free(pd);
}

/* A key for the push: the same parameters and body are the same push (a client's retry). */
static char *push_key(const char *what, const uint8_t *body, size_t len)
{
        uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
        char *key = malloc(48);

        for (const char *p = what; *p; p++) {
                h1 = (h1 ^ (uint8_t)*p) * 0x100000001b3ULL;
                h2 = (h2 ^ (uint8_t)*p) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
        }
        for (size_t i = 0; i < len; i++) {
                h1 = (h1 ^ body[i]) * 0x100000001b3ULL;
                h2 = (h2 ^ body[i]) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
        }
        if (key)
                snprintf(key, 48, "push-%016" PRIx64 "%016" PRIx64, h1, h2);
        return key;
}

void fp_coll_foreign_queue(struct fp_coll_server *s, struct evhttp_request *req,
                           fp_coll_build_fn build, void *arg, const char *peer, const char *what,
                           enum fp_coll_answer how)
{
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        uint8_t *body = malloc(len ? len : 1);
        struct pending *pd = calloc(1, sizeof(*pd));
        char *key = NULL;
        int r;

        if (!body || !pd) {
                free(body);
                free(pd);
                free(arg);
                return fp_coll_foreign_error(req, how, 503, "out of memory");
        }
        evbuffer_remove(in, body, len);
        s->st.bytes_received += len;
        key = push_key(what, body, len);
        *pd = (struct pending){
            .s = s, .req = req, .evcon = evhttp_request_get_connection(req), .how = how};
        snprintf(pd->peer, sizeof(pd->peer), "%s", peer);
        r = key ? fp_coll_writeq_add_built(s->writeq, build, arg, free, body, len, key, on_pushed,
                                           pd)
                : -ENOMEM;
        if (r < 0) {
                s->st.uploads_busy++;
                reply_error(pd, 503,
                            r == -EBUSY ? "too many uploads are waiting to be stored; try again "
                                          "later"
                                        : "out of memory");
                free(body);
                free(key);
                free(pd);
                free(arg);
                return;
        }
        if (pd->evcon)
                fp_coll_gate_on_close(s->gate, pd->evcon, on_conn_closed, pd);
}

void fp_coll_peer_of(struct evhttp_request *req, char *buf, size_t len)
{
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        char *addr = NULL;
        ev_uint16_t port;

        if (evcon)
                evhttp_connection_get_peer(evcon, &addr, &port);
        snprintf(buf, len, "%s", addr && *addr ? addr : "unknown");
}
