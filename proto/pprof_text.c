/* SPDX-License-Identifier: MIT */
/*
 * pprof profiles for people: the top table and folded stacks.
 *
 * top aggregates by function name, as `go tool pprof -top` does: flat is
 * what a function's own frames (the leaf of a sample) account for, cum
 * what every sample with the function anywhere on its stack accounts for,
 * counted once per sample however deep the recursion. Inlined frames
 * (extra lines of a location) are functions of their own. When samples
 * carry a "thread_name" label (and a numeric "thread" label with the tid)
 * a second table shows each thread's share.
 *
 * folded prints one "root;...;leaf value" line per distinct stack of
 * names, merged across labels and addresses, sorted, for flame-graph
 * tools; a sample without locations is the stack "[unknown]", so the
 * values add up to the profile's total.
 *
 * Both build their aggregation tables in a scratch struct fp_pprof, used
 * only as a string interner, so names are stored once and indexed densely.
 * Names from outside input are printed with control characters replaced,
 * so one frame is always one line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "escape.h"
#include "pprof-internal.h"

/* ---- values ---- */

/* Nanoseconds per unit for the time units pprof knows, 0 for others. */
static double unit_ns(const char *unit)
{
        if (!strcmp(unit, "nanoseconds") || !strcmp(unit, "ns"))
                return 1;
        if (!strcmp(unit, "microseconds") || !strcmp(unit, "us"))
                return 1e3;
        if (!strcmp(unit, "milliseconds") || !strcmp(unit, "ms"))
                return 1e6;
        if (!strcmp(unit, "seconds") || !strcmp(unit, "s"))
                return 1e9;
        return 0;
}

/* "%.2f" with a trailing ".00" dropped, as pprof prints scaled values. */
static void fmt_scaled(char *buf, size_t len, double v, const char *suffix)
{
        size_t n;

        snprintf(buf, len, "%.2f", v);
        n = strlen(buf);
        if (n > 3 && !strcmp(buf + n - 3, ".00"))
                buf[n - 3] = 0;
        n = strlen(buf);
        snprintf(buf + n, len - n, "%s", suffix);
}

/* A value for people: times scaled to s/ms/us/ns, bytes to B/kB/..., counts as they are. */
static void fmt_value(char *buf, size_t len, int64_t v, const char *unit)
{
        double ns = unit_ns(unit);

        if (v == 0) {
                snprintf(buf, len, "0");
        } else if (ns > 0) {
                double t = (double)v * ns;

                if (t >= 1e9 || t <= -1e9)
                        fmt_scaled(buf, len, t / 1e9, "s");
                else if (t >= 1e6 || t <= -1e6)
                        fmt_scaled(buf, len, t / 1e6, "ms");
                else if (t >= 1e3 || t <= -1e3)
                        fmt_scaled(buf, len, t / 1e3, "us");
                else
                        fmt_scaled(buf, len, t, "ns");
        } else if (!strcmp(unit, "bytes")) {
                static const char *const sfx[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
                double b = (double)v;
                size_t i = 0;

                while ((b >= 1024 || b <= -1024) && i + 1 < sizeof(sfx) / sizeof(sfx[0])) {
                        b /= 1024;
                        i++;
                }
                fmt_scaled(buf, len, b, sfx[i]);
        } else {
                snprintf(buf, len, "%" PRId64, v);
        }
}

static double share(int64_t v, int64_t total)
{
        return total > 0 ? 100.0 * (double)v / (double)total : 0.0;
}

/* Writes s with control characters (newlines, escapes) replaced by '?'. */
/* Names are any bytes a profiled program chose: escaped for the terminal (escape.h). */
static void put_name(FILE *out, const char *s)
{
        fp_escape_terminal(fp_write_file, out, s);
}

/* ---- frames ---- */

const char *fp_pp_frame_name(const struct fp_pprof *p, uint64_t location_id, size_t line, char *buf,
                             size_t buf_len)
{
        const struct fp_pp_location *l = &p->locations[location_id - 1];
        const struct fp_pp_mapping *m;
        const char *file, *base;
        uint64_t off;

        if (line < l->n_lines) {
                uint64_t fid = p->lines[l->line_off + line].function_id;

                if (fid) {
                        const struct fp_pp_function *f = &p->functions[fid - 1];

                        if (f->name)
                                return fp_pp_str(p, f->name);
                        if (f->system_name)
                                return fp_pp_str(p, f->system_name);
                }
        }
        if (!l->mapping_id)
                return "[unknown]";
        m = &p->mappings[l->mapping_id - 1];
        file = fp_pp_str(p, m->filename);
        if (!*file)
                return "[unknown]";
        base = strrchr(file, '/');
        base = base && base[1] ? base + 1 : file;
        /* An offset into the file is the same in every process that maps it. */
        off = l->address;
        if (l->address >= m->start && l->address < m->limit)
                off = l->address - m->start + m->offset;
        snprintf(buf, buf_len, "%s+0x%" PRIx64, base, off);
        return buf;
}

/* ---- top ---- */

struct top_node {
        int64_t flat;
        int64_t cum;
        size_t stamp; /* last sample (index + 1) counted into cum */
};

struct top {
        const struct fp_pprof *p;
        struct fp_pprof *names; /* node i is names->strs[i] */
        struct top_node *nodes;
        size_t *loc_off;  /* frames of location id l: frames[loc_off[l - 1] .. loc_off[l]) */
        uint32_t *frames; /* node indices, innermost first */
};

static void top_done(struct top *t)
{
        fp_pprof_free(t->names);
        free(t->nodes);
        free(t->loc_off);
        free(t->frames);
}

/* Resolves every location's frames to nodes once, so samples only add. */
static int top_build_frames(struct top *t)
{
        const struct fp_pprof *p = t->p;
        size_t n = 0, k = 0;
        char buf[512];

        for (size_t i = 0; i < p->n_locations; i++)
                n += p->locations[i].n_lines ? p->locations[i].n_lines : 1;
        t->names = fp_pprof_new();
        t->loc_off = fp_pp_calloc(p->n_locations + 1, sizeof(*t->loc_off));
        t->frames = fp_pp_calloc(n ? n : 1, sizeof(*t->frames));
        if (!t->names || !t->loc_off || !t->frames)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_locations; i++) {
                size_t nl = p->locations[i].n_lines ? p->locations[i].n_lines : 1;

                t->loc_off[i] = k;
                for (size_t j = 0; j < nl; j++) {
                        const char *name = fp_pp_frame_name(p, i + 1, j, buf, sizeof(buf));
                        int r = fp_pp_intern(t->names, name, strlen(name), &t->frames[k++]);

                        if (r < 0)
                                return r;
                }
        }
        t->loc_off[p->n_locations] = k;
        t->nodes = fp_pp_calloc(t->names->n_strs, sizeof(*t->nodes));
        return t->nodes ? 0 : -ENOMEM;
}

static void top_add_samples(struct top *t, size_t vi)
{
        const struct fp_pprof *p = t->p;

        for (size_t i = 0; i < p->n_samples; i++) {
                const struct fp_pp_sample *s = &p->samples[i];
                const uint64_t *locs = &p->sample_locs[s->loc_off];
                int64_t v = p->values[i * p->n_types + vi];
                struct top_node *nd;

                if (v == 0 || s->n_locs == 0)
                        continue;
                nd = &t->nodes[t->frames[t->loc_off[locs[0] - 1]]];
                nd->flat = fp_pp_add_sat(nd->flat, v);
                for (size_t j = 0; j < s->n_locs; j++)
                        for (size_t k = t->loc_off[locs[j] - 1]; k < t->loc_off[locs[j]]; k++) {
                                nd = &t->nodes[t->frames[k]];
                                if (nd->stamp == i + 1)
                                        continue;
                                nd->stamp = i + 1;
                                nd->cum = fp_pp_add_sat(nd->cum, v);
                        }
        }
}

static int node_cmp(const void *a, const void *b, void *ctx)
{
        const struct top *sort_top = ctx;
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        const struct top_node *nx = &sort_top->nodes[x], *ny = &sort_top->nodes[y];

        if (nx->flat != ny->flat)
                return nx->flat > ny->flat ? -1 : 1;
        if (nx->cum != ny->cum)
                return nx->cum > ny->cum ? -1 : 1;
        return strcmp(sort_top->names->strs[x].s, sort_top->names->strs[y].s);
}

static void write_header(const struct fp_pprof *p, size_t vi, FILE *out)
{
        const char *unit = fp_pp_str(p, p->types[vi].unit);
        char buf[64];

        for (size_t i = 0; i < p->n_comments; i++) {
                fputs("# ", out);
                put_name(out, fp_pp_str(p, p->comments[i]));
                fputc('\n', out);
        }
        fputs("Type: ", out);
        put_name(out, fp_pp_str(p, p->types[vi].type));
        if (*unit) {
                fputs(" (", out);
                put_name(out, unit);
                fputc(')', out);
        }
        fputc('\n', out);
        if (p->time_nanos > 0) {
                time_t sec = (time_t)(p->time_nanos / 1000000000);
                struct tm tm;

                if (gmtime_r(&sec, &tm) && strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm))
                        fprintf(out, "Time: %s\n", buf);
        }
        if (p->duration_nanos > 0) {
                fmt_value(buf, sizeof(buf), p->duration_nanos, "nanoseconds");
                fprintf(out, "Duration: %s\n", buf);
        }
        if (p->period > 0) {
                fprintf(out, "Period: %" PRId64, p->period);
                if (p->period_type.unit) {
                        fputc(' ', out);
                        put_name(out, fp_pp_str(p, p->period_type.unit));
                }
                if (p->period_type.type) {
                        fputs(" of ", out);
                        put_name(out, fp_pp_str(p, p->period_type.type));
                }
                fputc('\n', out);
        }
        fmt_value(buf, sizeof(buf), p->totals[vi], unit);
        fprintf(out, "Total: %s\n", buf);
}

/* ---- threads ---- */

struct thread_row {
        uint32_t name; /* string index in the profile, FP_PP_NOSTR: none */
        int64_t tid;
        bool has_tid;
        int64_t value;
};

struct thread_key {
        const struct thread_row *rows;
        const struct thread_row *row;
};

static bool thread_eq(const void *ctx, uint32_t idx)
{
        const struct thread_key *k = ctx;
        const struct thread_row *a = &k->rows[idx], *b = k->row;

        return a->name == b->name && a->has_tid == b->has_tid && a->tid == b->tid;
}

static int thread_cmp(const void *a, const void *b)
{
        const struct thread_row *x = a, *y = b;

        if (x->value != y->value)
                return x->value > y->value ? -1 : 1;
        if (x->name != y->name)
                return x->name < y->name ? -1 : 1;
        return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Per-thread shares; nothing when no sample has a "thread_name" label. */
static int write_threads(const struct fp_pprof *p, size_t vi, FILE *out)
{
        uint32_t kname = fp_pp_find_str(p, "thread_name"), ktid = fp_pp_find_str(p, "thread");
        const char *unit = fp_pp_str(p, p->types[vi].unit);
        struct fp_pp_itab tab = {0};
        struct thread_row *rows = NULL;
        size_t n = 0, cap = 0;
        bool any = false;
        int r = 0;

        if (kname == FP_PP_NOSTR)
                return 0;
        for (size_t i = 0; i < p->n_samples; i++) {
                const struct fp_pp_sample *s = &p->samples[i];
                struct thread_row row = {.name = FP_PP_NOSTR};
                struct thread_key k = {rows, &row};
                uint64_t h = p->seed;
                size_t slot;
                bool found;

                for (size_t j = 0; j < s->n_labels; j++) {
                        const struct fp_pp_label *l = &p->sample_labels[s->label_off + j];

                        if (l->key == kname && l->str != FP_PP_NOSTR) {
                                row.name = l->str;
                                any = true;
                        } else if (l->key == ktid && l->str == FP_PP_NOSTR) {
                                row.tid = l->num;
                                row.has_tid = true;
                        }
                }
                row.value = p->values[i * p->n_types + vi];
                h = fp_pp_hash_step(h, (uint64_t)row.name << 1 | row.has_tid);
                h = fp_pp_hash_step(h, (uint64_t)row.tid);
                r = fp_pp_itab_reserve(&tab);
                if (r < 0)
                        goto out;
                k.rows = rows;
                slot = fp_pp_itab_find(&tab, fp_pp_hash_final(h), thread_eq, &k, &found);
                if (found) {
                        struct thread_row *x = &rows[tab.slots[slot].idx1 - 1];

                        x->value = fp_pp_add_sat(x->value, row.value);
                        continue;
                }
                if (FP_PP_GROW(rows, cap, n + 1) < 0) {
                        r = -ENOMEM;
                        goto out;
                }
                rows[n] = row;
                fp_pp_itab_set(&tab, slot, fp_pp_hash_final(h), (uint32_t)n++);
        }
        if (!any)
                goto out;
        qsort(rows, n, sizeof(*rows), thread_cmp);
        fprintf(out, "\nThreads:\n%10s %6s  %s\n", "value", "share", "thread");
        for (size_t i = 0; i < n; i++) {
                char v[64];

                if (rows[i].value == 0)
                        continue;
                fmt_value(v, sizeof(v), rows[i].value, unit);
                fprintf(out, "%10s %5.2f%%  ", v, share(rows[i].value, p->totals[vi]));
                put_name(out, rows[i].name == FP_PP_NOSTR ? "[no thread name]"
                                                          : fp_pp_str(p, rows[i].name));
                if (rows[i].has_tid)
                        fprintf(out, " (%" PRId64 ")", rows[i].tid);
                fputc('\n', out);
        }
out:
        fp_pp_itab_done(&tab);
        free(rows);
        return r;
}

struct label_row {
        uint32_t name;
        int64_t value;
};

static int label_row_cmp(const void *a, const void *b)
{
        const struct label_row *x = a, *y = b;

        if (x->value != y->value)
                return x->value > y->value ? -1 : 1;
        return x->name < y->name ? -1 : x->name > y->name;
}

/* A table of shares by the values of one string label (write_by_label()). */
struct label_table {
        const char *key;   /* the label */
        const char *title; /* "Services:" */
        const char *head;  /* its column's heading */
        const char *none;  /* the row of samples without the label */
        const char *other; /* the row past MAX_LABEL_ROWS values */
        size_t min_rows;   /* written only with at least this many rows */
};

/*
 * Shares by the values of a string label: per service (the host tier's
 * "which services burn the CPU", written for two services or more), per
 * wait (off-CPU and wall profiles: why the threads waited). Past 256
 * values the rest are one row.
 */
static int write_by_label(const struct fp_pprof *p, size_t vi, const struct label_table *lt,
                          FILE *out)
{
        enum { MAX_LABEL_ROWS = 256 };
        uint32_t key = fp_pp_find_str(p, lt->key);
        const char *unit = fp_pp_str(p, p->types[vi].unit);
        struct label_row *rows;
        int64_t other = 0;
        size_t n = 0;

        if (key == FP_PP_NOSTR)
                return 0;
        rows = calloc(MAX_LABEL_ROWS, sizeof(*rows));
        if (!rows)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_samples; i++) {
                const struct fp_pp_sample *s = &p->samples[i];
                int64_t v = p->values[i * p->n_types + vi];
                uint32_t name = FP_PP_NOSTR;
                size_t k;

                for (size_t j = 0; j < s->n_labels; j++) {
                        const struct fp_pp_label *l = &p->sample_labels[s->label_off + j];
                        if (l->key == key && l->str != FP_PP_NOSTR)
                                name = l->str;
                }
                for (k = 0; k < n && rows[k].name != name; k++)
                        ;
                if (k == n && n == MAX_LABEL_ROWS) {
                        other = fp_pp_add_sat(other, v);
                        continue;
                }
                if (k == n)
                        rows[n++] = (struct label_row){.name = name};
                rows[k].value = fp_pp_add_sat(rows[k].value, v);
        }
        if (n + (other != 0) >= lt->min_rows) {
                qsort(rows, n, sizeof(*rows), label_row_cmp);
                fprintf(out, "\n%s\n%10s %6s  %s\n", lt->title, "value", "share", lt->head);
                for (size_t i = 0; i <= n; i++) {
                        int64_t v = i < n ? rows[i].value : other;
                        char b[64];
                        if (v == 0)
                                continue;
                        fmt_value(b, sizeof(b), v, unit);
                        fprintf(out, "%10s %5.2f%%  ", b, share(v, p->totals[vi]));
                        put_name(out, i == n                        ? lt->other
                                      : rows[i].name == FP_PP_NOSTR ? lt->none
                                                                    : fp_pp_str(p, rows[i].name));
                        fputc('\n', out);
                }
        }
        free(rows);
        return 0;
}

int fp_pprof_write_top(const struct fp_pprof *p, size_t value_index, size_t n, FILE *out)
{
        struct top t = {.p = p};
        const char *unit;
        uint32_t *order = NULL;
        size_t n_nodes = 0, shown;
        int64_t total, sum = 0, shown_flat = 0;
        char a[64], b[64];
        int r;

        if (!p || !out || value_index >= p->n_types)
                return -EINVAL;
        unit = fp_pp_str(p, p->types[value_index].unit);
        total = p->totals[value_index];
        r = top_build_frames(&t);
        if (r < 0)
                goto out;
        top_add_samples(&t, value_index);

        order = fp_pp_calloc(t.names->n_strs, sizeof(*order));
        if (!order) {
                r = -ENOMEM;
                goto out;
        }
        for (uint32_t i = 1; i < t.names->n_strs; i++)
                if (t.nodes[i].cum > 0)
                        order[n_nodes++] = i;
        qsort_r(order, n_nodes, sizeof(*order), node_cmp, &t);
        shown = n == 0 || n > n_nodes ? n_nodes : n;
        for (size_t i = 0; i < shown; i++)
                shown_flat = fp_pp_add_sat(shown_flat, t.nodes[order[i]].flat);

        write_header(p, value_index, out);
        fmt_value(a, sizeof(a), shown_flat, unit);
        fmt_value(b, sizeof(b), total, unit);
        fprintf(out, "Showing %zu of %zu functions, accounting for %s (%.2f%%) of %s total\n",
                shown, n_nodes, a, share(shown_flat, total), b);
        fprintf(out, "%10s %6s %6s %10s %6s  %s\n", "flat", "flat%", "sum%", "cum", "cum%",
                "function");
        for (size_t i = 0; i < shown; i++) {
                const struct top_node *nd = &t.nodes[order[i]];

                sum = fp_pp_add_sat(sum, nd->flat);
                fmt_value(a, sizeof(a), nd->flat, unit);
                fmt_value(b, sizeof(b), nd->cum, unit);
                fprintf(out, "%10s %5.2f%% %5.2f%% %10s %5.2f%%  ", a, share(nd->flat, total),
                        share(sum, total), b, share(nd->cum, total));
                put_name(out, t.names->strs[order[i]].s);
                fputc('\n', out);
        }
        static const struct label_table services = {.key = "service",
                                                    .title = "Services:",
                                                    .head = "service",
                                                    .none = "[no service]",
                                                    .other = "(other services)",
                                                    .min_rows = 2},
                                        waits = {.key = "wait",
                                                 .title = "Waits:",
                                                 .head = "wait",
                                                 .none = "[on the CPU]",
                                                 .other = "(other waits)",
                                                 .min_rows = 1};
        r = write_by_label(p, value_index, &services, out);
        if (r >= 0)
                r = write_by_label(p, value_index, &waits, out);
        if (r >= 0)
                r = write_threads(p, value_index, out);
        if (r >= 0 && (fflush(out) != 0 || ferror(out)))
                r = -EIO;
out:
        free(order);
        top_done(&t);
        return r;
}

/* ---- folded ---- */

struct folded_line {
        const char *stack;
        int64_t value;
};

static int folded_cmp(const void *a, const void *b)
{
        return strcmp(((const struct folded_line *)a)->stack,
                      ((const struct folded_line *)b)->stack);
}

/* Appends a frame name: control characters become '?', ';' (the separator) ':'. */
static int append_frame(char **buf, size_t *cap, size_t *len, const char *raw)
{
        char name[2048];
        fp_terminal_str(raw, name, sizeof(name));
        size_t n = strlen(name);

        if (n + 2 > SIZE_MAX - *len || FP_PP_GROW(*buf, *cap, *len + n + 2) < 0)
                return -ENOMEM;
        if (*len)
                (*buf)[(*len)++] = ';';
        for (size_t i = 0; i < n; i++) {
                char c = name[i];

                (*buf)[(*len)++] = c == ';' ? ':' : c; /* ';' separates the frames */
        }
        return 0;
}

int fp_pprof_write_folded(const struct fp_pprof *p, size_t value_index, FILE *out)
{
        struct fp_pprof *stacks = NULL;
        int64_t *sums = NULL;
        size_t n_sums = 0, cap_sums = 0, cap = 0;
        struct folded_line *lines = NULL;
        size_t n_lines = 0;
        char *buf = NULL, name[512];
        int r = 0;

        if (!p || !out || value_index >= p->n_types)
                return -EINVAL;
        stacks = fp_pprof_new();
        if (!stacks)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_samples; i++) {
                const struct fp_pp_sample *s = &p->samples[i];
                const uint64_t *locs = &p->sample_locs[s->loc_off];
                int64_t v = p->values[i * p->n_types + value_index];
                size_t len = 0;
                uint32_t idx;

                if (v == 0)
                        continue;
                /* A sample without a stack still counts, so the lines add up to the total. */
                if (s->n_locs == 0) {
                        r = append_frame(&buf, &cap, &len, "[unknown]");
                        if (r < 0)
                                goto out;
                }
                /* Root first: the last location, and in each its last (outermost) line. */
                for (size_t j = s->n_locs; j-- > 0;) {
                        const struct fp_pp_location *l = &p->locations[locs[j] - 1];

                        for (size_t k = l->n_lines ? l->n_lines : 1; k-- > 0;) {
                                r = append_frame(
                                    &buf, &cap, &len,
                                    fp_pp_frame_name(p, locs[j], k, name, sizeof(name)));
                                if (r < 0)
                                        goto out;
                        }
                }
                r = fp_pp_intern(stacks, buf, len, &idx);
                if (r < 0)
                        goto out;
                if (idx >= n_sums) {
                        if (FP_PP_GROW(sums, cap_sums, (size_t)idx + 1) < 0) {
                                r = -ENOMEM;
                                goto out;
                        }
                        memset(&sums[n_sums], 0, (idx + 1 - n_sums) * sizeof(*sums));
                        n_sums = idx + 1;
                }
                sums[idx] = fp_pp_add_sat(sums[idx], v);
        }
        lines = fp_pp_calloc(stacks->n_strs, sizeof(*lines));
        if (!lines) {
                r = -ENOMEM;
                goto out;
        }
        /* Index 0 is "", which no stack produces: every frame has a name. */
        for (size_t i = 1; i < stacks->n_strs; i++)
                lines[i - 1] = (struct folded_line){stacks->strs[i].s, sums[i]};
        n_lines = stacks->n_strs - 1;
        qsort(lines, n_lines, sizeof(*lines), folded_cmp);
        for (size_t i = 0; i < n_lines; i++)
                fprintf(out, "%s %" PRId64 "\n", lines[i].stack, lines[i].value);
        if (fflush(out) != 0 || ferror(out))
                r = -EIO;
out:
        free(lines);
        free(buf);
        free(sums);
        fp_pprof_free(stacks);
        return r;
}
