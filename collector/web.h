/* SPDX-License-Identifier: MIT */
/*
 * The collector's web page: a self-contained HTML page (no scripts, no
 * external assets) for people. GET / lists every series with its time
 * range, samples and drops, and links to its top table and its pprof;
 * GET /top?host=&pid=&event=... shows the flat/cumulative top table
 * of a selection (the same filter as /api/v1/profile).
 */
#pragma once

struct fp_coll_server;
struct evhttp_request;

void fp_coll_web_index(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_web_top(struct fp_coll_server *s, struct evhttp_request *req);
