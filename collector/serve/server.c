/* SPDX-License-Identifier: MIT */
/*
 * The HTTP(S) server, routing, authentication and retention; see
 * server.h.
 */
#include "server.h"
#include "http.h"
#include "log.h"
#include "api.h"
#include "foreign.h"
#include "escape.h"
#include "util.h"
#include "backend.h"
#include "views.h"
#include "web.h"
#include "writeq.h"
#include "gate.h"
#include "otlp.h"
#include "pyroscope.h"
#include "querier.h"
#include "debuginfod.h"
#include "debugfiles.h"
#include "dsyms.h"
#include "readers.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool authorized(struct fp_coll_server *s, struct evhttp_request *req)
{
        const char *h;

        if (!s->token)
                return true;
        h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
        if (h && strncasecmp(h, "Basic ", 6) == 0) {
                if (fp_coll_auth_ok(h, s->token))
                        return true;
                fp_coll_reply_error(req, 401,
                                    "wrong basic authentication (the password is the "
                                    "write token)");
                return false;
        }
        if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
                fp_coll_reply_error(req, 401, "missing bearer token (Authorization: Bearer ...)");
                return false;
        }
        if (!fp_coll_token_equal(h + 7, s->token)) {
                fp_coll_reply_error(req, 401, "wrong bearer token");
                return false;
        }
        return true;
}

/*
 * With --read-token-file, a read needs that token: as a bearer token, as
 * basic authentication's password (Grafana's data sources send it so),
 * or (the web page, which asks for it once) in the fleetprof_read
 * cookie. connect: refused in Connect's terms.
 */
static bool read_authorized(struct fp_coll_server *s, struct evhttp_request *req, bool connect)
{
        struct evkeyvalq *in = evhttp_request_get_input_headers(req);
        int ok;

        if (!s->read_token)
                return true;
        ok = fp_coll_read_auth(evhttp_find_header(in, "Authorization"),
                               evhttp_find_header(in, "Cookie"), s->read_token);
        if (ok > 0)
                return true;
        const char *why =
            ok < 0 ? "wrong read token" : "reads need the read token (Authorization: Bearer ...)";
        if (connect)
                fp_coll_connect_error(req, "unauthenticated", "%s", why);
        else
                fp_coll_reply_error(req, 401, "%s", why);
        return false;
}

/*
 * /buildid/ID/KIND, debuginfod's paths: ID lower-cased into id (ID_LEN),
 * KIND "debuginfo" or "executable" into kind. False: no such file (404
 * said).
 */
#define ID_LEN 130
static bool buildid_path(struct evhttp_request *req, const char *path, char *id, char *kind)
{
        int n = 0;

        if (sscanf(path, "/buildid/%129[0-9a-fA-F]/%15[a-z]%n", id, kind, &n) != 2 || path[n] ||
            strlen(id) >= ID_LEN - 1 || fp_dbgi_build_id_ok(id, NULL, 0) <= 0) {
                fp_coll_reply_error(req, 404, "no such build file: %.200s", path);
                return false;
        }
        for (char *c = id; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        if (strcmp(kind, "debuginfo") != 0 && strcmp(kind, "executable") != 0) {
                fp_coll_reply_error(req, 404,
                                    "this collector keeps debug files and executables only");
                return false;
        }
        return true;
}

static void count_upload(struct fp_coll_server *s, uint64_t *which)
{
        pthread_mutex_lock(&s->reads->lock);
        (*which)++;
        pthread_mutex_unlock(&s->reads->lock);
}

/*
 * POST /buildid/ID/debuginfo (or /executable), with the write token: a
 * debug file or an unstripped executable uploaded (from CI: agentctl
 * upload-debuginfo), checked (an ELF file whose sections lie within it,
 * of build ID, whose symbols load) and kept in the store's debug files
 * (debugfiles.h) for every collector of the store. On the reader thread:
 * the check reads the whole file.
 */
static void put_debuginfo(struct fp_coll_server *s, struct evhttp_request *req)
{
        const char *path = evhttp_uri_get_path(fp_coll_req_uri(req));
        struct evbuffer *body = fp_coll_req_body(req);
        char id[ID_LEN], kind[16], got[FP_DSYMS_ID_HEX], err[256];
        struct fp_dsyms *syms = NULL;
        size_t len = evbuffer_get_length(body);
        const uint8_t *data = len ? evbuffer_pullup(body, -1) : NULL;
        uint64_t evicted = 0;
        bool exec = false;
        int r;

        if (!buildid_path(req, path, id, kind))
                return;
        if (!data || fp_dsyms_inspect(data, len, got, &exec, err, sizeof(err)) < 0) {
                count_upload(s, &s->reads->debug_refused);
                fp_coll_reply_error(req, 400, "not stored: %s", len ? err : "the body is empty");
                return;
        }
        if (strcmp(got, id) != 0) {
                count_upload(s, &s->reads->debug_refused);
                fp_coll_reply_error(req, 400, "not stored: the file is of build %s, not %s", got,
                                    id);
                return;
        }
        if (fp_dsyms_load_mem(data, len, id, &syms, err, sizeof(err)) < 0) {
                count_upload(s, &s->reads->debug_refused);
                fp_coll_reply_error(req, 400, "not stored: %s", err);
                return;
        }
        fp_dsyms_unref(syms);
        r = fp_dfiles_put(s->dfiles, id, exec, data, len, &evicted);
        if (r == -EFBIG) {
                count_upload(s, &s->reads->debug_refused);
                fp_coll_reply_error(req, 413, "not stored: %s", fp_dfiles_errmsg(s->dfiles));
                return;
        }
        if (r < 0) {
                fp_log(LOG_WARNING, "an upload of build %s: %s", id, fp_dfiles_errmsg(s->dfiles));
                fp_coll_reply_error(req, 503, "not stored: %s", fp_dfiles_errmsg(s->dfiles));
                return;
        }
        count_upload(s, r == 0 ? &s->reads->debug_stored : &s->reads->debug_held);
        fp_dbgi_uploaded(s->names, id);
        struct evbuffer *b = evbuffer_new();
        if (!b) {
                fp_coll_reply_error(req, 503, "out of memory");
                return;
        }
        evbuffer_add_printf(b,
                            "{\"build_id\":\"%s\",\"stored\":%s,\"kind\":\"%s\",\"bytes\":%zu,"
                            "\"evicted\":%" PRIu64 "}\n",
                            id, r == 0 ? "true" : "false", exec ? "executable" : "debuginfo", len,
                            evicted);
        if (r == 0)
                fp_log(LOG_INFO, "build %s: %s of %zu bytes uploaded%s", id,
                       exec ? "an executable" : "a debug file", len,
                       evicted ? ", older builds evicted to make room" : "");
        fp_coll_reply(req, 200, "application/json", b);
        evbuffer_free(b);
}

static void free_file(const void *data, size_t len, void *arg)
{
        (void)len;
        (void)arg;
        free((void *)data);
}

/*
 * GET or HEAD /buildid/ID/KIND of an uploaded file, on the reader thread
 * (the store is read): an executable only where one was uploaded, a
 * debug file for either. HEAD reads no bytes: their size is in
 * X-Debuginfod-Size, as debuginfod says it.
 */
static void get_upload(struct fp_coll_server *s, struct evhttp_request *req)
{
        const char *path = evhttp_uri_get_path(fp_coll_req_uri(req));
        char id[ID_LEN], kind[16], size[32];
        struct fp_dfiles_info info;
        uint8_t *data = NULL;
        size_t len = 0;
        bool head = fp_coll_req_command(req) == EVHTTP_REQ_HEAD;
        int r;

        if (!buildid_path(req, path, id, kind))
                return;
        if (!s->dfiles) {
                fp_coll_reply_error(req, 404, "this collector has no file of build %s", id);
                return;
        }
        fp_dfiles_set_deadline(s->dfiles, fp_backend_deadline(s->store));
        r = head ? fp_dfiles_info(s->dfiles, id, &info)
                 : fp_dfiles_get(s->dfiles, id, true, &data, &len, &info);
        fp_dfiles_set_deadline(s->dfiles, 0);
        if (r < 0) {
                fp_coll_reply_error(req, 503, "%s", fp_dfiles_errmsg(s->dfiles));
                return;
        }
        if (r == 0 || (strcmp(kind, "executable") == 0 && !info.executable)) {
                free(data);
                fp_coll_reply_error(req, 404, "this collector has no %s of build %s",
                                    strcmp(kind, "executable") == 0 ? "executable" : "debug file",
                                    id);
                return;
        }
        snprintf(size, sizeof(size), "%" PRIu64, info.size);
        evhttp_add_header(fp_coll_req_out_headers(req), "X-Debuginfod-Size", size);
        evhttp_add_header(fp_coll_req_out_headers(req), "X-Fleetprof-Kind",
                          info.executable ? "executable" : "debuginfo");
        struct evbuffer *b = evbuffer_new();
        if (!b || (data && evbuffer_add_reference(b, data, len, free_file, NULL) < 0)) {
                free(data);
                if (b)
                        evbuffer_free(b);
                fp_coll_reply_error(req, 503, "out of memory");
                return;
        }
        fp_coll_reply(req, 200, "application/octet-stream", b);
        evbuffer_free(b);
}

/*
 * A read of /buildid/: the read token (read_authorized()), or the write
 * token, with which CI asks what is held before it uploads.
 */
static bool buildid_read_authorized(struct fp_coll_server *s, struct evhttp_request *req)
{
        const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");

        if (s->token && h && fp_coll_auth_ok(h, s->token))
                return true;
        return read_authorized(s, req, false);
}

/*
 * /buildid/ID/KIND: the collector as a debuginfod server (DEBUGINFOD_URLS
 * for perf, gdb, eu-stack on any host) of the debug files it fetched
 * (its cache: a file's descriptor handed to the answer on the loop) and
 * of those uploaded (the reader thread reads the store), with the read
 * token, or the write token (CI asks what is held before it uploads);
 * and, POSTed with the write token, an upload.
 */
static void buildid(struct fp_coll_server *s, struct evhttp_request *req, const char *path,
                    enum evhttp_cmd_type cmd)
{
        char id[ID_LEN], kind[16];
        struct evbuffer *b;
        uint64_t size;
        int fd, r;

        if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD && cmd != EVHTTP_REQ_POST) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                                  "GET, HEAD, POST");
                fp_coll_reply_error(req, 405, "/buildid/ takes GET, HEAD or POST");
                return;
        }
        if (cmd == EVHTTP_REQ_POST ? !authorized(s, req) : !buildid_read_authorized(s, req))
                return;
        if (!buildid_path(req, path, id, kind))
                return;
        if (cmd == EVHTTP_REQ_POST && !s->dfiles) {
                fp_coll_reply_error(req, 403, "uploads of debug files are off (--debuginfo-mb 0)");
                return;
        }
        if (cmd != EVHTTP_REQ_POST && strcmp(kind, "debuginfo") == 0 &&
            fp_dbgi_open_debug(s->names, id, &fd, &size) == 0) {
                char n[32];

                b = evbuffer_new();
                if (!b || evbuffer_add_file(b, fd, 0, (ev_off_t)size) < 0) {
                        if (b)
                                evbuffer_free(b);
                        else
                                close(fd);
                        fp_coll_reply_error(req, 503, "cannot send the debug file");
                        return;
                }
                snprintf(n, sizeof(n), "%" PRIu64, size);
                evhttp_add_header(evhttp_request_get_output_headers(req), "X-Debuginfod-Size", n);
                fp_coll_reply(req, 200, "application/octet-stream", b);
                evbuffer_free(b);
                return;
        }
        r = s->readers ? fp_coll_readers_add(s->readers, req,
                                             cmd == EVHTTP_REQ_POST ? put_debuginfo : get_upload,
                                             false, false)
                       : -ESHUTDOWN;
        if (r < 0)
                fp_coll_reply_error(req, 503, "%s",
                                    r == -EBUSY ? "too many reads waiting: ask again"
                                                : "the collector is stopping: ask again");
}

static void on_request(struct evhttp_request *req, void *arg)
{
        struct fp_coll_server *s = arg;
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        /*
         * auth: W an agent's upload (--token-file), R a read (--read-token-file), Q the same
         * in Connect's terms, - none. where: L on the loop thread (what costs the same
         * whatever was sent or stored), T the reader thread (readers.h), I the reader thread
         * when it is idle, else the loop (/healthz: fresh figures, or the last ones at once).
         */
        static const struct {
                const char *path;
                enum evhttp_cmd_type cmd;
                char auth;
                char where;
                void (*fn)(struct fp_coll_server *, struct evhttp_request *);
        } routes[] = {
            {"/api/v1/ingest", EVHTTP_REQ_POST, 'W', 'L', fp_coll_api_ingest},
            {"/ingest", EVHTTP_REQ_POST, 'W', 'L', fp_coll_pyro_ingest},
            {"/push.v1.PusherService/Push", EVHTTP_REQ_POST, 'W', 'L', fp_coll_pyro_push},
            {"/v1development/profiles", EVHTTP_REQ_POST, 'W', 'L', fp_coll_otlp_export},
            {"/api/v1/series", EVHTTP_REQ_GET, 'R', 'T', fp_coll_api_series},
            {"/api/v1/profile", EVHTTP_REQ_GET, 'R', 'T', fp_coll_api_profile},
            {"/healthz", EVHTTP_REQ_GET, '-', 'I', fp_coll_api_healthz},
            /* The page's own files hold no data: it asks for the read token itself. */
            {"/", EVHTTP_REQ_GET, '-', 'L', fp_coll_web_asset},
            {"/series", EVHTTP_REQ_GET, 'R', 'T', fp_coll_web_index},
            {"/top", EVHTTP_REQ_GET, 'R', 'T', fp_coll_web_top},
            {"/metrics", EVHTTP_REQ_GET, 'R', 'T', fp_coll_metrics},
            {"/api/v1/flamegraph", EVHTTP_REQ_GET, 'R', 'T', fp_coll_view_flamegraph},
            {"/api/v1/diff", EVHTTP_REQ_GET, 'R', 'T', fp_coll_view_diff},
            {"/api/v1/timeline", EVHTTP_REQ_GET, 'R', 'T', fp_coll_view_timeline},
            {"/ui/", EVHTTP_REQ_GET, '-', 'L', fp_coll_web_asset},
            {"/ui/app.js", EVHTTP_REQ_GET, '-', 'L', fp_coll_web_asset},
            {"/ui/app.css", EVHTTP_REQ_GET, '-', 'L', fp_coll_web_asset},
            /* Pyroscope's query API over Connect (querier.h): Q, a read refused in Connect's terms.
             */
            {"/querier.v1.QuerierService/ProfileTypes", EVHTTP_REQ_POST, 'Q', 'T', fp_coll_querier},
            {"/querier.v1.QuerierService/LabelNames", EVHTTP_REQ_POST, 'Q', 'T', fp_coll_querier},
            {"/querier.v1.QuerierService/LabelValues", EVHTTP_REQ_POST, 'Q', 'T', fp_coll_querier},
            {"/querier.v1.QuerierService/Series", EVHTTP_REQ_POST, 'Q', 'T', fp_coll_querier},
            {"/querier.v1.QuerierService/SelectMergeStacktraces", EVHTTP_REQ_POST, 'Q', 'T',
             fp_coll_querier},
            {"/querier.v1.QuerierService/SelectMergeProfile", EVHTTP_REQ_POST, 'Q', 'T',
             fp_coll_querier},
            {"/querier.v1.QuerierService/SelectSeries", EVHTTP_REQ_POST, 'Q', 'T', fp_coll_querier},
            {"/querier.v1.QuerierService/Diff", EVHTTP_REQ_POST, 'Q', 'T', fp_coll_querier},
            {"/settings.v1.SettingsService/Get", EVHTTP_REQ_POST, 'Q', 'T', fp_coll_querier},
            {"/pyroscope/render", EVHTTP_REQ_GET, 'R', 'T', fp_coll_pyro_render},
        };
        _Static_assert(sizeof(routes) / sizeof(routes[0]) <= FP_COLL_MAX_ROUTES, "by_route");

        size_t i;
        int code;
        const char *msg;

        s->st.requests++;
        if (!path || !*path)
                path = "/";
        for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
                if (strcmp(path, routes[i].path) == 0)
                        break;
        if (fp_coll_gate_refusal(req, &code, &msg)) {
                /* The query API's clients read its errors in Connect's terms. */
                if (i < sizeof(routes) / sizeof(routes[0]) && routes[i].auth == 'Q')
                        fp_coll_connect_reply(req, code, fp_coll_connect_code(code), msg);
                else
                        fp_coll_reply_error(req, code, "%s", msg);
                return;
        }
        if (i < sizeof(routes) / sizeof(routes[0])) {
                if (cmd != routes[i].cmd &&
                    !(cmd == EVHTTP_REQ_HEAD && routes[i].cmd == EVHTTP_REQ_GET)) {
                        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                                          routes[i].cmd == EVHTTP_REQ_GET ? "GET, HEAD" : "POST");
                        fp_coll_reply_error(req, 405, "%s takes %s", routes[i].path,
                                            routes[i].cmd == EVHTTP_REQ_GET ? "GET" : "POST");
                        return;
                }
                s->st.by_route[i].path = routes[i].path;
                s->st.by_route[i].n++;
                if ((routes[i].auth == 'W' && !authorized(s, req)) ||
                    ((routes[i].auth == 'R' || routes[i].auth == 'Q') &&
                     !read_authorized(s, req, routes[i].auth == 'Q')))
                        return;
                if (!s->readers && routes[i].where == 'T') {
                        static const char why[] = "the collector is stopping: ask again";
                        if (routes[i].auth == 'Q')
                                fp_coll_connect_reply(req, 503, "unavailable", why);
                        else
                                fp_coll_reply_error(req, 503, "%s", why);
                        return;
                }
                if (s->readers && (routes[i].where == 'T' ||
                                   (routes[i].where == 'I' && fp_coll_readers_idle(s->readers)))) {
                        int r = fp_coll_readers_add(s->readers, req, routes[i].fn,
                                                    routes[i].auth == 'Q', routes[i].where == 'I');
                        if (r == 0)
                                return;
                        if (routes[i].where == 'I') {
                                routes[i].fn(s, req);
                                return;
                        }
                        const char *why = r == -EBUSY
                                              ? "too many reads are waiting: ask again shortly"
                                              : "out of memory";
                        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
                                          "1");
                        if (routes[i].auth == 'Q')
                                fp_coll_connect_reply(req, 503, "unavailable", why);
                        else
                                fp_coll_reply_error(req, 503, "%s", why);
                        return;
                }
                routes[i].fn(s, req);
                return;
        }
        if (strncmp(path, "/buildid/", 9) == 0) {
                buildid(s, req, path, cmd);
                return;
        }
        s->st.not_found++;
        fp_coll_reply_error(req, 404, "no such endpoint: %.200s", path);
}

/* Each connection's bufferevent: TLS or plain, behind the gate (gate.h). */
static struct bufferevent *new_bev(struct event_base *base, void *arg)
{
        struct fp_coll_server *s = arg;
        struct bufferevent *bev;

        if (s->ssl_ctx) {
                SSL *ssl = SSL_new(s->ssl_ctx);
                if (!ssl)
                        return NULL;
                bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                     BEV_OPT_CLOSE_ON_FREE);
        } else {
                bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
        }
        return bev ? fp_coll_gate_wrap(s->gate, bev) : NULL;
}

static int tls_setup(struct fp_coll_server *s, const struct fp_coll_config *c, char *err,
                     size_t errlen)
{
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        char e[256];

        if (!ctx) {
                fp_errf(err, errlen, 0, "Failed to set up TLS: out of memory");
                return -ENOMEM;
        }
        s->ssl_ctx = ctx;
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        if (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert) != 1) {
                ERR_error_string_n(ERR_get_error(), e, sizeof(e));
                fp_errf(err, errlen, 0, "Failed to load the TLS certificate '%s': %s", c->tls_cert,
                        e);
                return -EINVAL;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, c->tls_key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
                ERR_error_string_n(ERR_get_error(), e, sizeof(e));
                fp_errf(err, errlen, 0, "Failed to load the TLS key '%s': %s", c->tls_key, e);
                return -EINVAL;
        }
        s->tls = true;
        return 0;
}

/* The fetcher thread's look at the store's uploaded files (debuginfod.h's uploads). */
static int from_store(void *arg, const char *id, uint8_t **data, size_t *len, char *err,
                      size_t errlen)
{
        struct fp_dfiles *f = arg;
        struct fp_dfiles_info info;
        int r = fp_dfiles_get(f, id, true, data, len, &info);

        if (r < 0)
                fp_errf(err, errlen, 0, "%s", fp_dfiles_errmsg(f));
        return r;
}

/*
 * Where frames the agents could not name are named from (debuginfod.h):
 * files uploaded to the store (--debuginfo-mb; 0: none), then the
 * debuginfod servers of
 * --debuginfod ("none": none), else $DEBUGINFOD_URLS (space-separated, as
 * elfutils reads it). A cache that cannot be used stops the start when
 * the servers were configured, and only turns naming off (one warning)
 * when they came from the environment.
 */
static int names_setup(struct fp_coll_server *s, const struct fp_coll_config *c, char *err,
                       size_t errlen)
{
        const char *env = getenv("DEBUGINFOD_URLS");
        _cleanup_free_ char *copy = NULL;
        const char *urls[16];
        struct fp_dbgi_config dc = {
            .urls = c->debuginfod,
            .n_urls = c->n_debuginfod,
            .cache_dir = c->debuginfod_cache,
            .cache_bytes = c->debuginfod_cache_mb << 20,
            .timeout_s = c->debuginfod_timeout_s,
            .retry_s = c->debuginfod_retry_s,
        };
        int r;

        if (s->dfiles_fetch) {
                dc.uploads = from_store;
                dc.uploads_arg = s->dfiles_fetch;
        }
        if (dc.n_urls == 1 && strcmp(dc.urls[0], "none") == 0)
                dc.n_urls = 0; /* no servers: uploads still name */
        else if (dc.n_urls == 0 && env && *env) {
                char *save = NULL;

                copy = strdup(env);
                if (!copy)
                        return fp_errf(err, errlen, -ENOMEM, "out of memory");
                for (char *t = strtok_r(copy, " \t\n", &save); t && dc.n_urls < 16;
                     t = strtok_r(NULL, " \t\n", &save))
                        urls[dc.n_urls++] = t;
                dc.urls = urls;
        }
        if (dc.n_urls == 0 && !dc.uploads)
                return 0;
        r = fp_dbgi_new(&dc, &s->names, err, errlen);
        if (r < 0 && !c->n_debuginfod && dc.n_urls) {
                fp_log(LOG_WARNING, "frames are not named from $DEBUGINFOD_URLS: %s", err);
                dc.n_urls = 0;
                r = dc.uploads ? fp_dbgi_new(&dc, &s->names, err, errlen) : 0;
                if (r < 0 || !dc.uploads)
                        return r;
        }
        if (r == 0 && dc.n_urls)
                fp_log(LOG_INFO, "naming frames from %zu debuginfod server%s (first %s), cache %s",
                       dc.n_urls, dc.n_urls == 1 ? "" : "s", dc.urls[0], dc.cache_dir);
        return r;
}

int fp_coll_server_new(struct event_base *base, const struct fp_coll_config *c,
                       struct fp_coll_server **ret, char *err, size_t errlen)
{
        struct fp_coll_server *s;
        struct fp_backend *wstore = NULL;
        char addr[128];
        unsigned port;
        int r;

        if (fp_parse_listen(c->listen, addr, sizeof(addr), &port) < 0) {
                fp_errf(err, errlen, 0, "invalid --listen '%s': ADDR:PORT, e.g. 127.0.0.1:7070",
                        c->listen);
                return -EINVAL;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                fp_errf(err, errlen, 0, "out of memory");
                return -ENOMEM;
        }
        s->base = base;
        s->st.started_ns = (int64_t)fp_now_ns(CLOCK_REALTIME);
        fp_hist_init(&s->st.decode, fp_hist_latency_bounds, fp_hist_latency_n);
        snprintf(s->listen, sizeof(s->listen), "%s", c->listen);
        if (c->token_file && (r = fp_read_token_file(c->token_file, &s->token, err, errlen)) < 0)
                goto fail;
        if (c->read_token_file &&
            (r = fp_read_token_file(c->read_token_file, &s->read_token, err, errlen)) < 0)
                goto fail;
        s->store_max_bytes = c->store_max_mb << 20;
        s->max_read_ns = c->max_read_ms * 1000000;
        s->max_read_bytes = c->max_read_mb << 20;
        r = fp_backend_open(c->store, c->store_credentials, s->store_max_bytes, true, &wstore, err,
                            errlen);
        if (r < 0)
                goto fail;
        if (r > 0)
                fp_log(LOG_WARNING, "%s", err);
        fp_backend_set_summaries(wstore, c->summaries);
        r = fp_coll_writeq_new(base, wstore, c->retention_s, (size_t)c->max_profile_mb << 20,
                               (size_t)c->max_queue_mb << 20, &s->writeq);
        if (r < 0) {
                fp_errf(err, errlen, 0, "Failed to start the writer thread: %s", strerror(-r));
                goto fail;
        }
        r = fp_backend_open(c->store, c->store_credentials, s->store_max_bytes, false, &s->store,
                            err, errlen);
        if (r < 0)
                goto fail;
        if (r > 0 && !fp_backend_is_clickhouse(s->store))
                fp_log(LOG_WARNING, "%s", err);
        fp_backend_set_summaries(s->store, c->summaries);
        s->reads = calloc(1, sizeof(*s->reads));
        if (!s->reads) {
                fp_errf(err, errlen, 0, "out of memory");
                r = -ENOMEM;
                goto fail;
        }
        pthread_mutex_init(&s->reads->lock, NULL);
        s->http = evhttp_new(base);
        if (!s->http) {
                fp_errf(err, errlen, 0, "Failed to create the HTTP server");
                r = -ENOMEM;
                goto fail;
        }
        evhttp_set_max_body_size(s->http, (ev_ssize_t)(c->max_body_mb << 20));
        evhttp_set_max_headers_size(s->http, 64 << 10);
        evhttp_set_timeout(s->http, 60);
        evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD);
        evhttp_set_gencb(s->http, on_request, s);
        r = fp_coll_gate_new(base, s->token, s->read_token, c->max_connections,
                             c->max_connections_per_ip, &s->gate);
        if (r < 0) {
                fp_errf(err, errlen, 0, "out of memory");
                goto fail;
        }
        evhttp_set_bevcb(s->http, new_bev, s);
        /* Uploaded debug files: one handle for the reader thread, one for the fetcher. */
        if (c->debuginfo_mb &&
            ((r = fp_dfiles_open(c->store, c->store_credentials, c->debuginfo_mb << 20, &s->dfiles,
                                 err, errlen)) < 0 ||
             (r = fp_dfiles_open(c->store, c->store_credentials, c->debuginfo_mb << 20,
                                 &s->dfiles_fetch, err, errlen)) < 0))
                goto fail;
        if ((r = names_setup(s, c, err, errlen)) < 0)
                goto fail;
        r = fp_coll_readers_new(s, &s->readers);
        if (r < 0) {
                fp_errf(err, errlen, 0, "Failed to start the reader thread: %s", strerror(-r));
                goto fail;
        }
        if (c->tls_cert && (r = tls_setup(s, c, err, errlen)) < 0)
                goto fail;
        s->sock = evhttp_bind_socket_with_handle(s->http, addr, (ev_uint16_t)port);
        if (!s->sock) {
                r = -errno ? -errno : -EADDRINUSE;
                fp_errf(err, errlen, 0, "Failed to listen on '%s': %s", c->listen, strerror(-r));
                goto fail;
        }
        *ret = s;
        return 0;
fail:
        fp_coll_server_free(s);
        return r;
}

void fp_coll_server_stop(struct fp_coll_server *s)
{
        unsigned answered;

        if (s->sock) {
                evhttp_del_accept_socket(s->http, s->sock);
                s->sock = NULL;
        }
        answered = fp_coll_readers_free(s->readers);
        s->readers = NULL;
        if (answered) {
                struct timeval tv = {0, FP_COLL_STOP_FLUSH_MS * 1000};
                event_base_loopexit(s->base, &tv);
                event_base_dispatch(s->base);
        }
}

void fp_coll_server_free(struct fp_coll_server *s)
{
        if (!s)
                return;
        fp_coll_readers_free(s->readers); /* ends the read it runs, answers the rest */
        fp_coll_writeq_free(s->writeq);   /* writes and answers what is queued */
        fp_dbgi_free(s->names);           /* its fetcher used dfiles_fetch */
        fp_dfiles_close(s->dfiles_fetch);
        fp_dfiles_close(s->dfiles);
        if (s->http)
                evhttp_free(s->http);
        fp_coll_gate_free(s->gate);
        if (s->ssl_ctx)
                SSL_CTX_free(s->ssl_ctx);
        fp_backend_close(s->store);
        if (s->reads)
                pthread_mutex_destroy(&s->reads->lock);
        free(s->reads);
        free(s->token);
        free(s->read_token);
        free(s);
}
