/* SPDX-License-Identifier: MIT */
/*
 * The web page; see web.h. Plain HTML with a little inline CSS: it must
 * read in any browser (and in curl) without fetching anything else.
 */
#include "debuginfod.h"
#include "web.h"
#include "api.h"
#include "filter.h"
#include "escape.h"
#include "util.h"
#include "pprof.h"
#include "http.h"
#include "backend.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char head[] =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n"
    "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"
    "td.n{text-align:right;font-family:monospace}.drop{color:#b00}"
    "pre{background:#f6f6f6;padding:8px}</style></head><body>\n";

struct page {
        struct evbuffer *b;
        uint64_t samples, drops;
};

/*
 * The query string that selects one series: a process by its pid, a host
 * tier's series (pid 0) by its service, process name and container.
 */
static void series_query(struct evbuffer *b, const struct fp_store_series *se)
{
        evbuffer_add_printf(b, "host=");
        fp_escape_url_evb(b, se->host);
        if (se->pid) {
                evbuffer_add_printf(b, "&amp;pid=%d", (int)se->pid);
        } else {
                if (se->service && se->service[0]) {
                        evbuffer_add_printf(b, "&amp;service=");
                        fp_escape_url_evb(b, se->service);
                }
                if (se->container && se->container[0]) {
                        evbuffer_add_printf(b, "&amp;container=");
                        fp_escape_url_evb(b, se->container);
                }
                evbuffer_add_printf(b, "&amp;process=");
                fp_escape_url_evb(b, se->comm);
        }
        evbuffer_add_printf(b, "&amp;event=");
        fp_escape_url_evb(b, se->event);
}

/*
 * A link to the top page of every series with key=value (a service merged
 * across its processes and hosts, a container across its services) for
 * event; nothing when value is empty.
 */
static void top_link(struct evbuffer *b, const char *key, const char *value, const char *event)
{
        if (!value || !value[0])
                return;
        evbuffer_add_printf(b, "<a href=\"/top?%s=", key);
        fp_escape_url_evb(b, value);
        evbuffer_add_printf(b, "&amp;event=");
        fp_escape_url_evb(b, event);
        evbuffer_add_printf(b, "\">");
        fp_escape_html_evb(b, value);
        evbuffer_add_printf(b, "</a>");
}

static int series_row(void *userdata, const struct fp_store_series *se,
                      const struct fp_coll_drops *d)
{
        struct page *pg = userdata;
        struct evbuffer *b = pg->b;
        char first[40], last[40];

        fp_rfc3339(se->first_ns, first, sizeof(first));
        fp_rfc3339(se->last_ns, last, sizeof(last));
        evbuffer_add_printf(b, "<tr><td>");
        fp_escape_html_evb(b, se->host);
        evbuffer_add_printf(b, "</td><td>");
        top_link(b, "service", se->service, se->event);
        evbuffer_add_printf(b, "</td><td>");
        top_link(b, "container", se->container, se->event);
        evbuffer_add_printf(b, "</td><td>");
        fp_escape_html_evb(b, se->comm);
        evbuffer_add_printf(b, "</td><td class=n>%d</td><td>", (int)se->pid);
        fp_escape_html_evb(b, se->event);
        evbuffer_add_printf(b,
                            "</td><td>%s</td><td>%s</td><td class=n>%" PRIu64
                            "</td><td class=n>%" PRIu64 "</td><td>",
                            first, last, se->buckets, se->count);
        for (size_t i = 0; i < d->n; i++) {
                evbuffer_add_printf(b, "<span class=drop>");
                fp_escape_html_evb(b, d->d[i].reason);
                evbuffer_add_printf(b, ": %" PRIu64 "</span><br>", d->d[i].count);
                pg->drops += d->d[i].count;
        }
        evbuffer_add_printf(b, "</td><td><a href=\"/top?");
        series_query(b, se);
        evbuffer_add_printf(b, "\">top</a> <a href=\"/api/v1/profile?");
        series_query(b, se);
        evbuffer_add_printf(b, "\">pprof</a></td></tr>\n");
        pg->samples += se->count;
        return 0;
}

void fp_coll_web_index(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_coll_filter f;
        struct page pg = {0};
        int r;

        if (fp_coll_filter_from_request(req, &f) < 0)
                return;
        pg.b = evbuffer_new();
        if (!pg.b) {
                fp_coll_reply_error(req, 503, "out of memory");
                return;
        }
        evbuffer_add_printf(pg.b, head, "fleetprof collector");
        evbuffer_add_printf(pg.b, "<p><a href=\"/\">flame graphs, time line and diff</a></p>\n");
        evbuffer_add_printf(pg.b,
                            "<h1>fleetprof collector</h1>\n<p>%s %s on %s%s. Uploads stored: "
                            "%" PRIu64 ", duplicates: %" PRIu64 ", refused: %" PRIu64 ".</p>\n",
                            "version", FP_VERSION, s->listen, s->tls ? " (HTTPS)" : "",
                            s->st.uploads_stored, s->st.uploads_duplicate, s->st.uploads_rejected);
        evbuffer_add_printf(
            pg.b, "<table>\n<tr><th>host</th><th>service</th><th>container</th><th>process</th>"
                  "<th>pid</th>"
                  "<th>event</th><th>first</th><th>last</th><th>uploads</th>"
                  "<th>samples</th><th>drops</th><th>view</th></tr>\n");
        r = fp_coll_api_walk_series(s, &f.f, series_row, &pg);
        if (r < 0) {
                evbuffer_free(pg.b);
                fp_coll_reply_error(req, 503, "cannot read the store: %s",
                                    fp_backend_errmsg(s->store));
                return;
        }
        evbuffer_add_printf(pg.b,
                            "</table>\n<p>%d series, %" PRIu64 " samples, %" PRIu64
                            " dropped.</p>\n<p>JSON: <a href=\"/api/v1/series\">/api/v1/series</a>."
                            " A merged profile for <code>go tool pprof</code>: "
                            "<code>/api/v1/profile?host=&amp;service=&amp;process=&amp;event=&amp;"
                            "from=&amp;"
                            "to=</code>.</p>\n</body></html>\n",
                            r, pg.samples, pg.drops);
        fp_coll_reply(req, 200, "text/html; charset=utf-8", pg.b);
        evbuffer_free(pg.b);
}

void fp_coll_web_top(struct fp_coll_server *s, struct evhttp_request *req)
{
        struct fp_coll_filter f;
        struct fp_pprof *p = NULL;
        struct evbuffer *b = NULL;
        char *text = NULL;
        size_t text_len = 0;
        FILE *mem;
        int r;

        if (fp_coll_filter_from_request(req, &f) < 0)
                return;
        p = fp_pprof_new();
        b = evbuffer_new();
        if (!p || !b) {
                fp_coll_reply_error(req, 503, "out of memory");
                goto out;
        }
        r = fp_backend_query_pprof(s->store, &f.f, p);
        if (r < 0) {
                fp_coll_reply_error(req, 503, "cannot query the store: %s",
                                    fp_backend_errmsg(s->store));
                goto out;
        }
        fp_dbgi_name(
            s->names, &p,
            fp_backend_deadline(s->store)); /* best effort: unnamed frames keep their offsets */
        mem = open_memstream(&text, &text_len);
        if (!mem) {
                fp_coll_reply_error(req, 503, "out of memory");
                goto out;
        }
        if (r > 0)
                (void)fp_pprof_write_top(p, 0, f.top_n ? f.top_n : 50, mem);
        else
                fprintf(mem, "no samples match this selection\n");
        fclose(mem);
        evbuffer_add_printf(b, head, "fleetprof top");
        evbuffer_add_printf(b, "<p><a href=\"/series\">all series</a></p>\n<h1>top: ");
        fp_escape_html_evb(b, f.host[0] ? f.host : "all hosts");
        if (f.service[0]) {
                evbuffer_add_printf(b, " service ");
                fp_escape_html_evb(b, f.service);
        }
        if (f.container[0]) {
                evbuffer_add_printf(b, " container ");
                fp_escape_html_evb(b, f.container);
        }
        evbuffer_add_printf(b, " ");
        fp_escape_html_evb(b, f.process);
        if (f.f.pid)
                evbuffer_add_printf(b, " pid %d", (int)f.f.pid);
        evbuffer_add_printf(b, " ");
        fp_escape_html_evb(b, f.event);
        evbuffer_add_printf(b, "</h1>\n<pre>");
        fp_escape_html_evb(b, text);
        evbuffer_add_printf(b, "</pre>\n</body></html>\n");
        fp_coll_reply(req, 200, "text/html; charset=utf-8", b);
out:
        free(text);
        if (b)
                evbuffer_free(b);
        fp_pprof_free(p);
}

void fp_coll_web_asset(struct fp_coll_server *s, struct evhttp_request *req)
{
        const struct evhttp_uri *uri = fp_coll_req_uri(req);
        const char *path = uri && evhttp_uri_get_path(uri) ? evhttp_uri_get_path(uri) : "";
        struct evkeyvalq *h = fp_coll_req_out_headers(req);
        struct evbuffer *b;

        (void)s;
        if (!*path || strcmp(path, "/") == 0)
                path = "/ui/"; /* the page is the collector's front page */
        for (unsigned i = 0; i < fp_coll_n_assets; i++) {
                if (strcmp(path, fp_coll_assets[i].path) != 0)
                        continue;
                b = evbuffer_new();
                if (!b || evbuffer_add_reference(b, fp_coll_assets[i].data, fp_coll_assets[i].len,
                                                 NULL, NULL) < 0) {
                        if (b)
                                evbuffer_free(b);
                        fp_coll_reply_error(req, 503, "out of memory");
                        return;
                }
                /* Nothing but the collector itself: no CDN, no inline script, no frames. */
                evhttp_add_header(
                    h, "Content-Security-Policy",
                    "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
                evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
                fp_coll_reply(req, 200, fp_coll_assets[i].type, b);
                evbuffer_free(b);
                return;
        }
        fp_coll_reply_error(req, 404, "no such file: %.200s", path);
}
