/* SPDX-License-Identifier: MIT */
/*
 * Metrics in the Prometheus text exposition format (version 0.0.4), for
 * the collector's GET /metrics and the agent's `agentctl metrics` and
 * --metrics-listen: one writer, so both speak the same format.
 *
 *     struct fp_prom p;
 *     fp_prom_init(&p, fp_write_file, stdout);
 *     fp_prom_family(&p, "fleetprof_agent_samples_total", "counter", "Samples kept");
 *     fp_prom_value(&p, "fleetprof_agent_samples_total", NULL, 1234);
 *     fp_prom_family(&p, "fleetprof_collector_uploads_total", "counter", "Uploads");
 *     fp_prom_value(&p, "fleetprof_collector_uploads_total", "outcome", "stored", 9);
 *
 * Label values are escaped (backslash, quote, newline; other control and
 * non-ASCII bytes become '?'), so no input can break a line. Histograms
 * keep cumulative buckets of fixed upper bounds in seconds.
 */
#pragma once

#include "escape.h"

#include <stddef.h>
#include <stdint.h>

struct fp_prom {
        fp_write_fn write;
        void *ctx;
};

void fp_prom_init(struct fp_prom *p, fp_write_fn write, void *ctx);
/* "# HELP name help" and "# TYPE name type" (counter, gauge, histogram, summary). */
void fp_prom_family(struct fp_prom *p, const char *name, const char *type, const char *help);
/* "name value" or "name{label="lvalue"} value" (label NULL: none). */
void fp_prom_value(struct fp_prom *p, const char *name, const char *label, const char *lvalue,
                   double value);

#define FP_HIST_MAX_BOUNDS 16

/* A histogram of durations; bounds in seconds, increasing, at most FP_HIST_MAX_BOUNDS. */
struct fp_hist {
        const double *bounds;
        size_t n_bounds;
        uint64_t counts[FP_HIST_MAX_BOUNDS + 1]; /* per bucket (not cumulative); last: +Inf */
        uint64_t count;
        double sum;
};

/* Latency bounds from 1 ms to 10 s, for handlers and store writes. */
extern const double fp_hist_latency_bounds[];
extern const size_t fp_hist_latency_n;

void fp_hist_init(struct fp_hist *h, const double *bounds, size_t n_bounds);
void fp_hist_observe(struct fp_hist *h, double seconds);
/* The histogram's _bucket{le=...}, _sum and _count lines (after its family line). */
void fp_prom_hist(struct fp_prom *p, const char *name, const struct fp_hist *h);
