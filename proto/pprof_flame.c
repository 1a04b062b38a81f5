/* SPDX-License-Identifier: MIT */
/*
 * Flame graphs: a profile's samples as a call tree, root first, for the
 * collector's web page (pprof.h, fp_flame_*).
 *
 * Node 0 is the root ("all"). A node is one frame name under one parent
 * (so the same function reached along two paths is two nodes, as a flame
 * graph draws it); (parent, name) -> node is a hash index. Each node has
 * two value sets, so a diff is one tree: set 0 the profile asked for, set
 * 1 its baseline. total = self + the children's totals, always: pruning
 * folds the children it cuts into one "(other)" child of the same
 * parent, so no value is lost and the root's total stays the profile's.
 */
#include "pprof-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_NODE UINT32_MAX

struct flame_node {
        uint32_t name; /* index into names */
        uint32_t parent, first_child, next_sibling;
        int64_t total[2], self[2];
};

struct fp_flame {
        struct fp_pprof *names; /* interned frame names */
        struct flame_node *nodes;
        size_t n_nodes, cap_nodes;
        struct fp_pp_itab index; /* (parent, name) -> node */
};

struct child_key {
        const struct fp_flame *f;
        uint32_t parent, name;
};

static bool child_eq(const void *ctx, uint32_t idx)
{
        const struct child_key *k = ctx;
        return k->f->nodes[idx].parent == k->parent && k->f->nodes[idx].name == k->name;
}

static uint32_t child_hash(uint32_t parent, uint32_t name)
{
        return fp_pp_hash_final(fp_pp_hash_step(fp_pp_hash_step(0x666c616d65ULL, parent), name));
}

/* A new node under parent (NO_NODE: the root). */
static int add_node(struct fp_flame *f, uint32_t parent, uint32_t name, uint32_t *ret)
{
        if (f->n_nodes >= UINT32_MAX - 1)
                return -E2BIG;
        if (FP_PP_GROW(f->nodes, f->cap_nodes, f->n_nodes + 1) < 0)
                return -ENOMEM;
        uint32_t i = (uint32_t)f->n_nodes++;
        f->nodes[i] = (struct flame_node){
            .name = name, .parent = parent, .first_child = NO_NODE, .next_sibling = NO_NODE};
        if (parent != NO_NODE) {
                f->nodes[i].next_sibling = f->nodes[parent].first_child;
                f->nodes[parent].first_child = i;
        }
        *ret = i;
        return 0;
}

int fp_flame_new(struct fp_flame **ret)
{
        struct fp_flame *f = fp_pp_calloc(1, sizeof(*f));
        uint32_t root, name;

        if (!f || !(f->names = fp_pprof_new())) {
                free(f);
                return -ENOMEM;
        }
        if (fp_pp_intern(f->names, "all", 3, &name) < 0 || add_node(f, NO_NODE, name, &root) < 0) {
                fp_flame_free(f);
                return -ENOMEM;
        }
        *ret = f;
        return 0;
}

void fp_flame_free(struct fp_flame *f)
{
        if (!f)
                return;
        fp_pprof_free(f->names);
        free(f->nodes);
        fp_pp_itab_done(&f->index);
        free(f);
}

/* The child of parent named name, created when missing. */
static int child_of(struct fp_flame *f, uint32_t parent, uint32_t name, uint32_t *ret)
{
        struct child_key k = {f, parent, name};
        uint32_t h = child_hash(parent, name);
        bool found;
        int r = fp_pp_itab_reserve(&f->index);

        if (r < 0)
                return r;
        size_t slot = fp_pp_itab_find(&f->index, h, child_eq, &k, &found);
        if (found) {
                *ret = f->index.slots[slot].idx1 - 1;
                return 0;
        }
        r = add_node(f, parent, name, ret);
        if (r < 0)
                return r;
        fp_pp_itab_set(&f->index, slot, h, *ret);
        return 0;
}

int fp_flame_add(struct fp_flame *f, const struct fp_pprof *p, size_t vi, unsigned set)
{
        uint32_t *frame_names = NULL; /* per location's lines: loc_off[l - 1] .. */
        size_t *loc_off = NULL, n = 0, k = 0;
        char buf[512];
        int r = 0;

        if (!f || !p || vi >= p->n_types || set > 1)
                return -EINVAL;
        /* Every location's frame names, interned once. */
        for (size_t i = 0; i < p->n_locations; i++)
                n += p->locations[i].n_lines ? p->locations[i].n_lines : 1;
        loc_off = fp_pp_calloc(p->n_locations + 1, sizeof(*loc_off));
        frame_names = fp_pp_calloc(n ? n : 1, sizeof(*frame_names));
        if (!loc_off || !frame_names) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < p->n_locations; i++) {
                size_t nl = p->locations[i].n_lines ? p->locations[i].n_lines : 1;
                loc_off[i] = k;
                for (size_t j = 0; j < nl; j++) {
                        const char *name = fp_pp_frame_name(p, i + 1, j, buf, sizeof(buf));
                        if ((r = fp_pp_intern(f->names, name, strlen(name), &frame_names[k++])) < 0)
                                goto out;
                }
        }
        loc_off[p->n_locations] = k;
        uint32_t unknown;
        if ((r = fp_pp_intern(f->names, "[unknown]", 9, &unknown)) < 0)
                goto out;

        for (size_t i = 0; i < p->n_samples; i++) {
                const struct fp_pp_sample *s = &p->samples[i];
                const uint64_t *locs = &p->sample_locs[s->loc_off];
                int64_t v = p->values[i * p->n_types + vi];
                uint32_t node = 0;

                if (v <= 0)
                        continue;
                f->nodes[0].total[set] = fp_pp_add_sat(f->nodes[0].total[set], v);
                if (s->n_locs == 0 && (r = child_of(f, 0, unknown, &node)) < 0)
                        goto out;
                if (s->n_locs == 0)
                        f->nodes[node].total[set] = fp_pp_add_sat(f->nodes[node].total[set], v);
                /* Root first: the last location, and in each its last (outermost) line. */
                for (size_t j = s->n_locs; j-- > 0;) {
                        uint64_t l = locs[j];
                        for (size_t m = loc_off[l]; m-- > loc_off[l - 1];) {
                                if ((r = child_of(f, node, frame_names[m], &node)) < 0)
                                        goto out;
                                f->nodes[node].total[set] =
                                    fp_pp_add_sat(f->nodes[node].total[set], v);
                        }
                }
                f->nodes[node].self[set] = fp_pp_add_sat(f->nodes[node].self[set], v);
        }
out:
        free(loc_off);
        free(frame_names);
        return r;
}

size_t fp_flame_n_nodes(const struct fp_flame *f)
{
        return f->n_nodes;
}

int64_t fp_flame_total(const struct fp_flame *f, unsigned set)
{
        return set <= 1 ? f->nodes[0].total[set] : 0;
}

static int cmp_i64_desc(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * Keeps the nodes whose larger total (of both sets) is at least the
 * max_nodes-th largest; the children a parent loses go into one "(other)"
 * child of it, so every total still adds up. The tree is rebuilt.
 */
int fp_flame_prune(struct fp_flame *f, size_t max_nodes)
{
        int64_t *weights, cut;
        struct fp_flame *g = NULL;
        uint32_t *map = NULL, other;
        int r;

        if (max_nodes < 2 || f->n_nodes <= max_nodes)
                return 0;
        weights = fp_pp_calloc(f->n_nodes, sizeof(*weights));
        map = fp_pp_calloc(f->n_nodes, sizeof(*map));
        if (!weights || !map) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < f->n_nodes; i++)
                weights[i] = f->nodes[i].total[0] > f->nodes[i].total[1] ? f->nodes[i].total[0]
                                                                         : f->nodes[i].total[1];
        qsort(weights, f->n_nodes, sizeof(*weights), cmp_i64_desc);
        /* Half the room for "(other)" nodes, which a cut parent may need. */
        cut = weights[max_nodes / 2 - 1];
        if (cut <= 0)
                cut = 1;
        /* Ties at the edge: those heavier, and as many of the equal ones as fit. */
        size_t above = 0, room;
        while (above < f->n_nodes && weights[above] > cut)
                above++;
        room = max_nodes / 2 > above ? max_nodes / 2 - above : 0;
        if ((r = fp_flame_new(&g)) < 0 || (r = fp_pp_intern(g->names, "(other)", 7, &other)) < 0)
                goto out;
        g->nodes[0] = f->nodes[0];
        g->nodes[0].first_child = NO_NODE;
        map[0] = 0;
        /* Nodes are created after their parents: one pass in index order. */
        for (size_t i = 1; i < f->n_nodes; i++) {
                const struct flame_node *o = &f->nodes[i];
                uint32_t np = map[o->parent], nn, name;
                int64_t w = o->total[0] > o->total[1] ? o->total[0] : o->total[1];

                if (np == NO_NODE) {
                        map[i] = NO_NODE; /* under a cut node: already counted there */
                        continue;
                }
                if (w > cut || (w == cut && room > 0)) {
                        if (w == cut)
                                room--;
                        const char *s = fp_pp_str(f->names, o->name);
                        if ((r = fp_pp_intern(g->names, s, strlen(s), &name)) < 0 ||
                            (r = child_of(g, np, name, &nn)) < 0)
                                goto out;
                        g->nodes[nn].self[0] = o->self[0];
                        g->nodes[nn].self[1] = o->self[1];
                        g->nodes[nn].total[0] = o->total[0];
                        g->nodes[nn].total[1] = o->total[1];
                        map[i] = nn;
                        continue;
                }
                /* Cut: its whole subtree joins the parent's "(other)". */
                if ((r = child_of(g, np, other, &nn)) < 0)
                        goto out;
                for (unsigned s = 0; s < 2; s++) {
                        g->nodes[nn].total[s] = fp_pp_add_sat(g->nodes[nn].total[s], o->total[s]);
                        g->nodes[nn].self[s] = fp_pp_add_sat(g->nodes[nn].self[s], o->total[s]);
                }
                map[i] = NO_NODE;
        }
        /* Swap the pruned tree in. */
        struct fp_flame tmp = *f;
        *f = *g;
        *g = tmp;
        r = 0;
out:
        fp_flame_free(g);
        free(weights);
        free(map);
        return r;
}

static void put(fp_write_fn w, void *ctx, const char *s)
{
        w(ctx, s, strlen(s));
}

static void put_i64(fp_write_fn w, void *ctx, int64_t v)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%lld", (long long)v);
        put(w, ctx, buf);
}

/*
 * Writes node i's members up to its children: {"name":..,"self":..,
 * "total":..[,"base_self":..,"base_total":..],"children":[
 */
static void open_node(const struct fp_flame *f, uint32_t i, bool diff, fp_write_fn w, void *ctx)
{
        const struct flame_node *n = &f->nodes[i];

        put(w, ctx, "{\"name\":");
        fp_escape_json(w, ctx, fp_pp_str(f->names, n->name));
        put(w, ctx, ",\"self\":");
        put_i64(w, ctx, n->self[0]);
        put(w, ctx, ",\"total\":");
        put_i64(w, ctx, n->total[0]);
        if (diff) {
                put(w, ctx, ",\"base_self\":");
                put_i64(w, ctx, n->self[1]);
                put(w, ctx, ",\"base_total\":");
                put_i64(w, ctx, n->total[1]);
        }
        put(w, ctx, ",\"children\":[");
}

/* The heavier child first, as a flame graph draws them left to right. */
static int cmp_child(const void *a, const void *b, void *ctx)
{
        const struct fp_flame *f = ctx;
        const struct flame_node *x = &f->nodes[*(const uint32_t *)a];
        const struct flame_node *y = &f->nodes[*(const uint32_t *)b];
        int64_t wx = x->total[0] + x->total[1], wy = y->total[0] + y->total[1];
        if (wx != wy)
                return wx < wy ? 1 : -1;
        return strcmp(fp_pp_str(f->names, x->name), fp_pp_str(f->names, y->name));
}

/*
 * Each node's children, heaviest first, in one array: node i's are
 * kids[kid_off[i]] .. kids[kid_off[i + 1] - 1]. 0 or -ENOMEM.
 */
static int sorted_children(const struct fp_flame *f, uint32_t **ret_kids, size_t **ret_off)
{
        uint32_t *kids = fp_pp_calloc(f->n_nodes, sizeof(*kids));
        size_t *kid_off = fp_pp_calloc(f->n_nodes + 1, sizeof(*kid_off));
        size_t *cursor = fp_pp_calloc(f->n_nodes, sizeof(*cursor));

        if (!kids || !kid_off || !cursor) {
                free(kids);
                free(kid_off);
                free(cursor);
                return -ENOMEM;
        }
        for (size_t i = 1; i < f->n_nodes; i++)
                kid_off[f->nodes[i].parent + 1]++;
        for (size_t i = 0; i < f->n_nodes; i++)
                kid_off[i + 1] += kid_off[i];
        for (size_t i = 0; i < f->n_nodes; i++)
                cursor[i] = kid_off[i];
        for (size_t i = 1; i < f->n_nodes; i++)
                kids[cursor[f->nodes[i].parent]++] = (uint32_t)i;
        for (size_t i = 0; i < f->n_nodes; i++)
                qsort_r(kids + kid_off[i], kid_off[i + 1] - kid_off[i], sizeof(*kids), cmp_child,
                        (void *)f);
        free(cursor);
        *ret_kids = kids;
        *ret_off = kid_off;
        return 0;
}

int fp_flame_write_json(const struct fp_flame *f, bool diff, fp_write_fn w, void *ctx)
{
        uint32_t *kids = NULL, *stack = fp_pp_calloc(f->n_nodes, sizeof(*stack));
        size_t *kid_off = NULL, *cursor = fp_pp_calloc(f->n_nodes, sizeof(*cursor));
        size_t depth = 0;
        int r = 0;

        if (!stack || !cursor || sorted_children(f, &kids, &kid_off) < 0) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < f->n_nodes; i++)
                cursor[i] = kid_off[i];
        /* Depth first without recursion: stacks can be thousands of frames deep. */
        open_node(f, 0, diff, w, ctx);
        stack[depth++] = 0;
        while (depth) {
                uint32_t top = stack[depth - 1];
                if (cursor[top] == kid_off[top + 1]) {
                        put(w, ctx, "]}");
                        depth--;
                        continue;
                }
                uint32_t c = kids[cursor[top]++];
                if (cursor[top] - 1 > kid_off[top])
                        put(w, ctx, ",");
                open_node(f, c, diff, w, ctx);
                stack[depth++] = c;
        }
out:
        free(kids);
        free(kid_off);
        free(cursor);
        free(stack);
        return r;
}

size_t fp_flame_n_names(const struct fp_flame *f)
{
        return f->names->n_strs;
}

const char *fp_flame_name(const struct fp_flame *f, size_t i)
{
        return i < f->names->n_strs ? fp_pp_str(f->names, (uint32_t)i) : "";
}

int fp_flame_levels(const struct fp_flame *f, fp_flame_bar_fn fn, void *ctx)
{
        /* Preorder: a level's nodes come out left to right in it. */
        uint32_t *kids = NULL, *order = fp_pp_calloc(f->n_nodes, sizeof(*order));
        uint32_t *stack = fp_pp_calloc(f->n_nodes, sizeof(*stack));
        size_t *kid_off = NULL, *level = fp_pp_calloc(f->n_nodes, sizeof(*level));
        size_t *by_level = NULL, *level_off = NULL, n = 0, depth = 0, max_level = 0;
        int64_t(*x)[2] = fp_pp_calloc(f->n_nodes, sizeof(*x));
        int r = 0;

        if (!order || !stack || !level || !x || sorted_children(f, &kids, &kid_off) < 0) {
                r = -ENOMEM;
                goto out;
        }
        stack[depth++] = 0;
        while (depth) {
                uint32_t i = stack[--depth];
                order[n++] = i;
                if (level[i] > max_level)
                        max_level = level[i];
                /* Its self first, then its children, heaviest first (pushed in reverse). */
                int64_t next[2] = {x[i][0] + f->nodes[i].self[0], x[i][1] + f->nodes[i].self[1]};
                for (size_t k = kid_off[i]; k < kid_off[i + 1]; k++) {
                        uint32_t c = kids[k];
                        level[c] = level[i] + 1;
                        for (int s = 0; s < 2; s++) {
                                x[c][s] = next[s];
                                next[s] += f->nodes[c].total[s];
                        }
                }
                for (size_t k = kid_off[i + 1]; k > kid_off[i]; k--)
                        stack[depth++] = kids[k - 1];
        }
        /* Bucketed by level, keeping the preorder within each. */
        by_level = fp_pp_calloc(n, sizeof(*by_level));
        level_off = fp_pp_calloc(max_level + 2, sizeof(*level_off));
        if (!by_level || !level_off) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t k = 0; k < n; k++)
                level_off[level[order[k]] + 1]++;
        for (size_t l = 0; l <= max_level; l++)
                level_off[l + 1] += level_off[l];
        for (size_t k = 0; k < n; k++)
                by_level[level_off[level[order[k]]]++] = order[k];
        for (size_t k = 0; k < n && r >= 0; k++) {
                const struct flame_node *nd = &f->nodes[by_level[k]];
                struct fp_flame_bar b = {
                    .level = level[by_level[k]],
                    .name = nd->name,
                    .x = {x[by_level[k]][0], x[by_level[k]][1]},
                    .total = {nd->total[0], nd->total[1]},
                    .self = {nd->self[0], nd->self[1]},
                };
                r = fn(ctx, &b);
        }
out:
        free(kids);
        free(kid_off);
        free(order);
        free(stack);
        free(level);
        free(by_level);
        free(level_off);
        free(x);
        return r;
}
