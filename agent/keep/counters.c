/* SPDX-License-Identifier: MIT */
/*
 * Counter groups in profiles: the group query of the store and the
 * counters section of `dump --format top`; see counters.h.
 */
#include "counters.h"
#include "escape.h"
#include "targetconf.h"
#include "pprof.h"
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 64

/* ---- the group query ---- */

struct series_row {
        char *host, *event, *config;
        pid_t pid;
        uint64_t starttime;
};

struct series_list {
        struct series_row *v;
        size_t n, cap;
};

static void series_list_free(struct series_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->v[i].host);
                free(l->v[i].event);
                free(l->v[i].config);
        }
        free(l->v);
}

static int collect_series(void *userdata, const struct fp_store_series *se)
{
        struct series_list *l = userdata;
        struct series_row *row;

        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 16;
                void *v = realloc(l->v, cap * sizeof(*l->v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        row = &l->v[l->n];
        *row = (struct series_row){.host = strdup(se->host ? se->host : ""),
                                   .event = strdup(se->event),
                                   .config = strdup(se->config ? se->config : ""),
                                   .pid = se->pid,
                                   .starttime = se->starttime};
        l->n++;
        if (!row->host || !row->event || !row->config)
                return -ENOMEM;
        return 0;
}

/* Adds the values of the counter se (one target's event) to p as a sample type. */
static int add_counter(struct fp_store *s, const struct fp_store_filter *f,
                       const struct series_row *se, struct fp_pprof *p)
{
        struct fp_store_filter mf = *f;
        struct fp_pprof *m = fp_pprof_new();
        int r;

        if (!m)
                return -ENOMEM;
        mf.host = se->host;
        mf.pid = se->pid;
        mf.starttime = se->starttime;
        mf.event = se->event;
        r = fp_store_query_pprof(s, &mf, m);
        if (r > 0) {
                r = fp_pprof_merge_typed(p, m, se->event);
                if (r == -EINVAL) /* stored under another sample type: not a counter */
                        r = 0;
        }
        fp_pprof_free(m);
        return r;
}

int fp_counters_query(struct fp_store *s, const struct fp_store_filter *f, struct fp_pprof *p)
{
        struct fp_store_filter all = *f, fr = *f;
        struct series_list sl = {0};
        struct fp_pprof *ref = NULL;
        char leader[NAME_MAX_LEN];
        int r, n;

        all.event = NULL;
        r = fp_store_list_series(s, &all, collect_series, &sl);
        if (r < 0)
                goto out;
        if (!fr.event && sl.n) {
                fp_targetconf_event(sl.v[0].config, 0, leader, sizeof(leader));
                fr.event = leader[0] ? leader : NULL;
        }
        ref = fp_pprof_new();
        if (!ref) {
                r = -ENOMEM;
                goto out;
        }
        n = r = fp_store_query_pprof(s, &fr, ref);
        if (r <= 0)
                goto out;
        r = fp_pprof_merge_typed(p, ref, NULL);
        /* Counter k of every target this event leads, k in config order. */
        for (size_t k = 1; r >= 0 && fr.event && k < 64; k++) {
                bool any = false;
                for (size_t i = 0; r >= 0 && i < sl.n; i++) {
                        const struct series_row *se = &sl.v[i];
                        char name[NAME_MAX_LEN];
                        fp_targetconf_event(se->config, 0, leader, sizeof(leader));
                        fp_targetconf_event(se->config, k, name, sizeof(name));
                        any = any || name[0];
                        if (strcmp(leader, fr.event) != 0 || strcmp(name, se->event) != 0)
                                continue;
                        r = add_counter(s, f, se, p);
                }
                if (!any)
                        break;
        }
        if (r >= 0)
                r = n;
out:
        fp_pprof_free(ref);
        series_list_free(&sl);
        return r;
}

/* ---- dump --format top ---- */

struct fn_row {
        const char *name;
        int64_t *values;
};

static size_t cmp_index; /* qsort has no context argument */

static int cmp_rows(const void *a, const void *b)
{
        const struct fn_row *x = a, *y = b;
        if (x->values[cmp_index] != y->values[cmp_index])
                return x->values[cmp_index] > y->values[cmp_index] ? -1 : 1;
        return strcmp(x->name, y->name);
}

/* A value in its unit: seconds for nanoseconds, else the count. */
static void format_value(char *buf, size_t len, int64_t v, const char *unit)
{
        if (strcmp(unit, "nanoseconds") == 0)
                snprintf(buf, len, "%.2fs", (double)v / 1e9);
        else
                snprintf(buf, len, "%" PRId64, v);
}

/* The index of the counter type named name (any unit), or -1. */
static int type_index(const struct fp_pprof *p, const char *name)
{
        for (size_t i = 2; i < fp_pprof_n_sample_types(p); i++)
                if (strcmp(fp_pprof_sample_type(p, i, NULL), name) == 0)
                        return (int)i;
        return -1;
}

static double ratio(int64_t a, int64_t b, double scale)
{
        return b > 0 ? (double)a * scale / (double)b : 0.0;
}

/*
 * Flat values per leaf function, sorted by value_index: *ret_n rows whose
 * values point into *ret_values (both malloc'd, for the caller to free).
 */
static int function_rows(const struct fp_pprof *p, size_t value_index, struct fn_row **ret,
                         size_t *ret_n, int64_t **ret_values)
{
        size_t nt = fp_pprof_n_sample_types(p), ns = fp_pprof_n_samples(p), n = 0;
        struct fn_row *rows = calloc(ns ? ns : 1, sizeof(*rows));
        int64_t *values = calloc((ns ? ns : 1) * nt, sizeof(*values));

        if (!rows || !values) {
                free(rows);
                free(values);
                return -ENOMEM;
        }
        for (size_t i = 0; i < ns; i++) {
                struct fp_pprof_sample_view sv;
                struct fp_pprof_location_view lv;
                const char *name = "[unknown]";
                size_t j;

                if (fp_pprof_sample_get(p, i, &sv) < 0)
                        continue;
                /* Time in the kernel (kernel frames excluded) goes to the function that entered it.
                 */
                for (size_t l = 0; l < sv.n_locations; l++) {
                        if (fp_pprof_location_get(p, sv.location_ids[l], &lv) < 0)
                                break;
                        name = lv.function_name[0] ? lv.function_name : "[unknown]";
                        if (strcmp(name, "[kernel]") != 0)
                                break;
                }
                for (j = 0; j < n && strcmp(rows[j].name, name) != 0; j++)
                        ;
                if (j == n) {
                        rows[n].name = name;
                        rows[n].values = &values[n * nt];
                        n++;
                }
                for (size_t t = 0; t < nt; t++)
                        rows[j].values[t] += sv.values[t];
        }
        cmp_index = value_index < nt ? value_index : 0;
        qsort(rows, n, sizeof(*rows), cmp_rows);
        *ret = rows;
        *ret_n = n;
        *ret_values = values;
        return 0;
}

int fp_counters_write_top(const struct fp_pprof *p, size_t value_index, size_t n, FILE *out)
{
        size_t nt = fp_pprof_n_sample_types(p);
        const char *cpu_unit = "";
        const char *cpu = nt > 1 ? fp_pprof_sample_type(p, 1, &cpu_unit) : NULL;
        int64_t cpu_ns = cpu && strcmp(cpu_unit, "nanoseconds") == 0 ? fp_pprof_total(p, 1) : 0;
        int ins = type_index(p, "instructions"), cyc = type_index(p, "cycles");
        int cmiss = type_index(p, "cache-misses"), bmiss = type_index(p, "branch-misses");
        struct fn_row *rows = NULL;
        int64_t *values = NULL;
        size_t n_rows = 0;
        char buf[64];

        if (nt <= 2)
                return 0;
        if (cyc < 0)
                cyc = type_index(p, "cpu-cycles");
        fprintf(out, "\nCounters (each a sample type: go tool pprof -sample_index=NAME):\n");
        for (size_t i = 2; i < nt; i++) {
                const char *unit, *name = fp_pprof_sample_type(p, i, &unit);
                format_value(buf, sizeof(buf), fp_pprof_total(p, i), unit);
                fprintf(out, "  %-24s %16s", name, buf);
                if (cpu_ns > 0)
                        fprintf(out, "  %14.1f per CPU-second",
                                ratio(fp_pprof_total(p, i), cpu_ns, 1e9));
                fputc('\n', out);
        }
        if (ins >= 0 && (cyc >= 0 || cmiss >= 0 || bmiss >= 0)) {
                int64_t ti = fp_pprof_total(p, (size_t)ins);
                fprintf(out, "Ratios:\n");
                if (cyc >= 0)
                        fprintf(out, "  %-40s %8.2f\n", "IPC (instructions per cycle)",
                                ratio(ti, fp_pprof_total(p, (size_t)cyc), 1));
                if (cmiss >= 0)
                        fprintf(out, "  %-40s %8.2f\n", "cache-misses per 1k instructions",
                                ratio(fp_pprof_total(p, (size_t)cmiss), ti, 1000));
                if (bmiss >= 0)
                        fprintf(out, "  %-40s %8.2f\n", "branch-misses per 1k instructions",
                                ratio(fp_pprof_total(p, (size_t)bmiss), ti, 1000));
        }

        int r = function_rows(p, value_index, &rows, &n_rows, &values);
        if (r < 0)
                return r;
        fprintf(out, "Counters per function (flat; time in the kernel charged to the function "
                     "that entered it):\n");
        fprintf(out, "%12s", fp_pprof_sample_type(p, value_index < nt ? value_index : 1, NULL));
        for (size_t i = 2; i < nt; i++)
                fprintf(out, " %16s", fp_pprof_sample_type(p, i, NULL));
        if (ins >= 0 && cyc >= 0)
                fprintf(out, " %6s", "IPC");
        fprintf(out, "  function\n");
        for (size_t k = 0; k < n_rows && (n == 0 || k < n); k++) {
                const char *unit;
                size_t vi = value_index < nt ? value_index : 1;
                fp_pprof_sample_type(p, vi, &unit);
                format_value(buf, sizeof(buf), rows[k].values[vi], unit);
                fprintf(out, "%12s", buf);
                for (size_t i = 2; i < nt; i++) {
                        fp_pprof_sample_type(p, i, &unit);
                        format_value(buf, sizeof(buf), rows[k].values[i], unit);
                        fprintf(out, " %16s", buf);
                }
                if (ins >= 0 && cyc >= 0)
                        fprintf(out, " %6.2f", ratio(rows[k].values[ins], rows[k].values[cyc], 1));
                fputs("  ", out);
                fp_escape_terminal(fp_write_file, out, rows[k].name);
                fputc('\n', out);
        }
        free(values);
        free(rows);
        return 0;
}
