/* SPDX-License-Identifier: MIT */
/*
 * One sample of a target's thread into a stack of its open bucket: the
 * kernel's callchain, the user part unwound from the stack copy (or taken
 * from the frame-pointer chain with its leaf fixed up), each frame
 * resolved against the process's mappings (re-read from /proc on a miss,
 * at most every 100 ms), then aggregated with the sample's period and
 * counters. A sample that cannot be kept is counted by reason in the
 * target's stats.
 *
 * This part of the target module only is called (by the ring reader in
 * threads.c); it calls nothing of the target's back, only the stages
 * below: maps, unwinding and symbols, and the aggregator.
 */
#include "target-internal.h"
#include "aggregate.h"
#include "maps.h"
#include "symbols.h"
#include "unwind.h"
#include "util.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <time.h>

/*
 * The mapping of addr, re-reading /proc/PID/maps on a miss (a mapping newer
 * than our view, from dlopen), at most every 100 ms and at most once per
 * call site's *reloaded.
 */
static uint32_t find_mapping(struct fp_target *t, uint64_t addr, bool *reloaded)
{
        uint32_t idx = fp_maps_find(t->maps, addr);
        uint64_t now;

        if (idx || *reloaded)
                return idx;
        *reloaded = true;
        now = fp_now_ns(CLOCK_MONOTONIC);
        if (now - t->maps_reload_ns <= 100000000ULL)
                return 0;
        t->maps_reload_ns = now;
        (void)fp_maps_load_proc(t->maps);
        return fp_maps_find(t->maps, addr);
}

static void resolve_frames(void *userdata, struct fp_frame *frames, uint32_t n)
{
        struct fp_target *t = userdata;
        bool reloaded = false;

        for (uint32_t i = 0; i < n; i++) {
                if (frames[i].flags & FP_FRAME_KERNEL_TIME)
                        continue;
                frames[i].mapping = find_mapping(t, frames[i].addr, &reloaded);
                if (!frames[i].mapping) {
                        t->st.unresolved++;
                        continue;
                }
                /* Load the symbols while the file is surely still there. */
                (void)fp_maps_symbolize(t->maps, frames[i].mapping, frames[i].addr, NULL);
        }
}

/* The unwinder's view of a code address: its mapping's CFI table, or none. */
static void lookup_code(void *userdata, uint64_t ip, struct fp_unwind_code *ret)
{
        struct fp_target *t = userdata;
        bool reloaded = false;
        uint32_t idx = find_mapping(t, ip, &reloaded);
        struct fp_mapping *x;
        struct fp_symtab *st;

        *ret = (struct fp_unwind_code){0};
        if (!idx)
                return;
        x = fp_maps_get(t->maps, idx);
        if (x->kind != FP_MAPPING_FILE && x->kind != FP_MAPPING_VDSO)
                return;
        ret->file_backed = true;
        st = fp_maps_symtab(t->maps, idx);
        if (st && fp_symtab_offset_to_vaddr(st, ip - x->start + x->pgoff, &ret->vaddr) == 0)
                ret->cfi = fp_symtab_cfi(st);
}

/*
 * Frame n of a stack at code address ip: the leaf (n == 0) is where the
 * thread was; every frame below it is a return address, stepped back into
 * the call so that it names the caller's line and function even when the
 * call was the function's last instruction.
 */
static struct fp_frame code_frame(uint32_t n, uint64_t ip)
{
        return (struct fp_frame){.addr = n == 0 ? ip : ip - 1};
}

/*
 * The user part of a sample's stack into f (n frames so far), from the
 * stack copy (auto, dwarf), or from the kernel's frame-pointer callchain
 * with the leaf fixed up (fp). Returns the new n.
 */
static uint32_t user_frames(struct fp_target *t, const struct fp_perf_sample *s, struct fp_frame *f,
                            uint32_t n, const uint64_t *chain, size_t n_chain)
{
        struct fp_unwind_regs regs = {s->user_ip, s->user_sp, s->user_bp};
        uint64_t ips[MAX_FRAMES];
        size_t n_ips = 0;

        t->st.stack_bytes += s->stack_size;
        if (t->cfg.unwind == FP_UNWIND_FP || !s->has_regs) {
                uint64_t ra;
                for (size_t i = 0; i < n_chain && n_ips < MAX_FRAMES; i++)
                        ips[n_ips++] = chain[i];
                if (s->has_regs && n_ips && ips[0] == s->user_ip && n_ips < MAX_FRAMES &&
                    fp_unwind_fix_leaf(&regs, s->stack, s->stack_size, lookup_code, t,
                                       n_ips > 1 ? ips[1] : 0, &ra)) {
                        memmove(ips + 2, ips + 1, (n_ips - 1) * sizeof(ips[0]));
                        ips[1] = ra;
                        n_ips++;
                        t->st.leaf_fixups++;
                }
        } else {
                struct fp_unwind_result res;
                fp_unwind_user(t->cfg.unwind, &regs, s->stack, s->stack_size, lookup_code, t, ips,
                               MAX_FRAMES - n - 1, &res);
                n_ips = res.n;
                t->st.frames_cfi += res.by_cfi;
                t->st.frames_fp += res.by_fp;
                if (res.end == FP_UNWIND_END_ROOT) {
                        t->st.unwound_root++;
                } else if (res.end == FP_UNWIND_END_STACK_SHORT) {
                        t->st.stack_copy_short++;
                } else {
                        t->st.unwind_failed++;
                }
                for (size_t i = 0; i < n_ips && n < MAX_FRAMES - 1; i++, n++)
                        f[n] = code_frame(n, ips[i]);
                if (res.end != FP_UNWIND_END_ROOT)
                        f[n++] = (struct fp_frame){.flags = FP_FRAME_TRUNCATED};
                return n;
        }
        for (size_t i = 0; i < n_ips && n < MAX_FRAMES; i++, n++)
                f[n] = code_frame(n, ips[i]);
        return n;
}

void fp_target_add_sample(struct fp_target *t, const struct fp_perf_sample *s)
{
        struct fp_frame *f = t->frames;
        uint32_t n = 0;
        uint64_t context = PERF_CONTEXT_USER;
        bool in_kernel = (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
        uint32_t first_real;
        const uint64_t *user = NULL;
        size_t n_user = 0;

        if (t->revoked) {
                t->st.revoked++;
                return;
        }
        /* Time spent in the kernel with kernel frames excluded: one synthetic leaf. */
        if (in_kernel && !t->cfg.kernel_frames)
                f[n++] = (struct fp_frame){.flags = FP_FRAME_KERNEL_TIME};
        first_real = n;

        for (uint64_t i = 0; i < s->nr && n < MAX_FRAMES; i++) {
                uint64_t ip = s->ips[i];
                if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
                        context = ip;
                        if (context == PERF_CONTEXT_USER && t->cfg.stack_bytes) {
                                /* The user part is unwound (or fixed up) below. */
                                user = s->ips + i + 1;
                                n_user = s->nr - i - 1;
                                break;
                        }
                        continue;
                }
                if (context != PERF_CONTEXT_USER && context != PERF_CONTEXT_KERNEL)
                        continue;
                if (context == PERF_CONTEXT_KERNEL && !t->cfg.kernel_frames)
                        continue;
                f[n] = code_frame(n, ip);
                n++;
        }
        if (t->cfg.stack_bytes && (s->has_regs || user))
                n = user_frames(t, s, f, n, user, n_user);
        if (n == first_real) {
                /* No callchain: keep the sample at its ip (or as [unknown]) rather than drop it. */
                t->st.unwind_empty++;
                if (n == 0 || (s->ip && t->cfg.kernel_frames))
                        f[n++] = (struct fp_frame){.addr = s->ip};
        }
        int r = fp_agg_add(t->agg, (pid_t)s->tid, fp_maps_epoch(t->maps), f, n, s->period,
                           s->n_counters ? s->counters : NULL, resolve_frames, t);
        if (r == -ENOSPC) {
                /* The bucket's stack table is full: the time is kept, under one stand-in. */
                t->st.stacks_over_limit++;
                f[0] = (struct fp_frame){.flags = FP_FRAME_OVERFLOW};
                r = fp_agg_add(t->agg, (pid_t)s->tid, 0, f, 1, s->period,
                               s->n_counters ? s->counters : NULL, NULL, NULL);
        }
        if (r == 0) {
                t->st.samples++;
                t->st.value += s->period;
                for (unsigned i = 0; i < s->n_counters; i++)
                        t->st.counter_total[i] += s->counters[i];
                t->st.time_enabled += s->d_enabled;
                t->st.time_running += s->d_running;
        } else {
                t->st.dropped_nomem++;
        }
}