/* SPDX-License-Identifier: MIT */
/*
 * The collector's web pages.
 *
 * GET / (and /ui/) is the interactive page (collector/ui/: index.html, app.js,
 * app.css): series, time line, flame graph, top table, diff, callers and
 * callees, drawn in the browser from the JSON of views.c. Its files are
 * embedded into the binary at build time (embed.cmake), served with a
 * Content-Security-Policy that allows nothing but the collector itself,
 * so the page works offline and from the packages.
 *
 * GET /series is a plain HTML page (no scripts) that reads in any browser and in
 * curl: every series with its time range, samples and drops, and links to
 * its top table, its pprof and the interactive page; GET
 * /top?host=&pid=&event=... shows the flat/cumulative top table of a
 * selection (the same filter as /api/v1/profile).
 */
#pragma once

#include <stddef.h>

struct fp_coll_server;
struct evhttp_request;

void fp_coll_web_index(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_web_top(struct fp_coll_server *s, struct evhttp_request *req);
/* One of the page's files (/ui/, /ui/app.js, ...); 404 for any other /ui/ path. */
void fp_coll_web_asset(struct fp_coll_server *s, struct evhttp_request *req);

/* An embedded file of the page (ui_assets.c, generated). */
struct fp_coll_asset {
        const char *path, *type;
        const unsigned char *data;
        size_t len;
};
extern const struct fp_coll_asset fp_coll_assets[];
extern const unsigned fp_coll_n_assets;
