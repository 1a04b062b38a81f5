/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text format writer; see metrics.h.
 */
#include "prom.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const double fp_hist_latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.1,   0.25,   0.5,   1,    2.5,   10};
const size_t fp_hist_latency_n = sizeof(fp_hist_latency_bounds) / sizeof(fp_hist_latency_bounds[0]);

void fp_prom_init(struct fp_prom *p, fp_write_fn write, void *ctx)
{
        p->write = write;
        p->ctx = ctx;
}

static void put(struct fp_prom *p, const char *s)
{
        p->write(p->ctx, s, strlen(s));
}

void fp_prom_family(struct fp_prom *p, const char *name, const char *type, const char *help)
{
        put(p, "# HELP ");
        put(p, name);
        put(p, " ");
        put(p, help);
        put(p, "\n# TYPE ");
        put(p, name);
        put(p, " ");
        put(p, type);
        put(p, "\n");
}

/* A label value: \\, \" and \n escaped; other control and non-ASCII bytes as '?'. */
static void put_label_value(struct fp_prom *p, const char *v)
{
        for (; *v; v++) {
                unsigned char c = (unsigned char)*v;
                if (c == '\\' || c == '"')
                        p->write(p->ctx, (const char[]){'\\', (char)c}, 2);
                else if (c == '\n')
                        put(p, "\\n");
                else if (c < 0x20 || c >= 0x7f)
                        put(p, "?");
                else
                        p->write(p->ctx, v, 1);
        }
}

/* A sample value as Prometheus reads it: integers exactly, +Inf, NaN. */
static void put_number(struct fp_prom *p, double v)
{
        char buf[64];

        if (isnan(v))
                snprintf(buf, sizeof(buf), "NaN");
        else if (isinf(v))
                snprintf(buf, sizeof(buf), v > 0 ? "+Inf" : "-Inf");
        else if (v == floor(v) && fabs(v) < 9007199254740992.0)
                snprintf(buf, sizeof(buf), "%.0f", v);
        else
                snprintf(buf, sizeof(buf), "%.9g", v);
        put(p, buf);
}

void fp_prom_value(struct fp_prom *p, const char *name, const char *label, const char *lvalue,
                   double value)
{
        put(p, name);
        if (label) {
                put(p, "{");
                put(p, label);
                put(p, "=\"");
                put_label_value(p, lvalue ? lvalue : "");
                put(p, "\"}");
        }
        put(p, " ");
        put_number(p, value);
        put(p, "\n");
}

void fp_hist_init(struct fp_hist *h, const double *bounds, size_t n_bounds)
{
        memset(h, 0, sizeof(*h));
        h->bounds = bounds;
        h->n_bounds = n_bounds > FP_HIST_MAX_BOUNDS ? FP_HIST_MAX_BOUNDS : n_bounds;
}

void fp_hist_observe(struct fp_hist *h, double seconds)
{
        size_t i = 0;
        while (i < h->n_bounds && seconds > h->bounds[i])
                i++;
        h->counts[i]++;
        h->count++;
        h->sum += seconds;
}

void fp_prom_hist(struct fp_prom *p, const char *name, const struct fp_hist *h)
{
        char metric[256], le[32];
        uint64_t cum = 0;

        snprintf(metric, sizeof(metric), "%s_bucket", name);
        for (size_t i = 0; i <= h->n_bounds; i++) {
                cum += h->counts[i];
                if (i < h->n_bounds)
                        snprintf(le, sizeof(le), "%g", h->bounds[i]);
                else
                        snprintf(le, sizeof(le), "+Inf");
                fp_prom_value(p, metric, "le", le, (double)cum);
        }
        snprintf(metric, sizeof(metric), "%s_sum", name);
        fp_prom_value(p, metric, NULL, NULL, h->sum);
        snprintf(metric, sizeof(metric), "%s_count", name);
        fp_prom_value(p, metric, NULL, NULL, (double)h->count);
}
