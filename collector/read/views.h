/* SPDX-License-Identifier: MIT */
/*
 * The web page's JSON: flame graph, diff and time line of a selection
 * (views.c says what each answers).
 */
#pragma once

struct fp_coll_server;
struct evhttp_request;

void fp_coll_view_flamegraph(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_view_diff(struct fp_coll_server *s, struct evhttp_request *req);
void fp_coll_view_timeline(struct fp_coll_server *s, struct evhttp_request *req);
