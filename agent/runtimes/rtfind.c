/* SPDX-License-Identifier: MIT */
/* An interpreter recognised in a live process's files (rtfind.h). */
#include "rtfind.h"

#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "maps.h"
#include "symbols.h"

#define WHY_MAX 512
#define BIN_MAX 256 /* the largest runtime's answer (checked at each call) */

/* What fp_rt_find() keeps of a process, per runtime: its last answer. */
struct rt_state {
        char why[WHY_MAX];
        alignas(max_align_t) unsigned char bin[BIN_MAX];
};

int fp_rt_find(struct fp_maps *m, const struct fp_sym_inspector *in, fp_rt_judge_fn judge,
               size_t bin_size, const void **ret_bin, uint64_t *ret_bias, const char **ret_why)
{
        size_t slot = fp_sym_inspector_slot(in);
        struct rt_state *st =
            bin_size <= BIN_MAX ? fp_maps_runtime_state(m, slot, sizeof(*st)) : NULL;
        alignas(max_align_t) unsigned char bin[BIN_MAX];
        char why[WHY_MAX];
        int found = 0;

        if (!st)
                return 0;
        /*
         * Live mappings, whose tables are already read: an interpreter's own
         * file is among the first a sample hits.
         */
        for (size_t i = 0; i < fp_maps_n_live(m); i++) {
                const struct fp_mapping *x = fp_maps_live_at(m, i);
                const void *f = x && x->symtab ? fp_symtab_facts(x->symtab, slot) : NULL;
                int r = f ? judge(f, x->path, bin, why, sizeof(why)) : 0;
                uint64_t vaddr;
                if (r > 0 && fp_symtab_offset_to_vaddr(x->symtab, x->pgoff, &vaddr) == 0) {
                        memcpy(st->bin, bin, bin_size);
                        *ret_bin = st->bin;
                        *ret_bias = x->start - vaddr;
                        return 1;
                }
                if (r < 0 && !found) {
                        /* Said once per file: its processes' samples stay native-only. */
                        if (!fp_symtab_refusal_said(x->symtab, slot)) {
                                fp_log(LOG_WARNING, "%s: %s; its samples stay native-only",
                                       in->name, why);
                                fp_symcache_count_refusal(fp_maps_symcache(m), slot);
                        }
                        snprintf(st->why, sizeof(st->why), "%s", why);
                        *ret_why = st->why;
                        found = -1;
                }
        }
        return found;
}
