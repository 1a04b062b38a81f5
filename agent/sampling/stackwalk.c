/* SPDX-License-Identifier: MIT */
/*
 * One sample into a stack of frames (see stackwalk.h): the kernel's
 * callchain, the user part unwound from the stack copy (or taken from the
 * frame-pointer chain with its leaf fixed up), each frame resolved against
 * the process's mappings (re-read from /proc on a miss when the walker
 * may: at most every 100 ms, less often while re-reads find nothing).
 * Both tiers use it: a target's samples (samples.c) and the host tier's
 * (host.c). It calls only the stages below: maps, unwinding and symbols.
 */
#include "stackwalk.h"
#include "hotspot.h"
#include "jvmnames.h"
#include "runtimes.h"
#include "maps.h"
#include "symbols.h"
#include "unwind.h"
#include "util.h"

#include <linux/perf_event.h>
#include <string.h>
#include <time.h>

/*
 * The mapping of addr, re-reading /proc/PID/maps on a miss (a mapping newer
 * than our view), at most once per call site's *reloaded and with the wait
 * between re-reads stackwalk.h describes.
 */
static uint32_t find_mapping(struct fp_stackwalk *w, uint64_t addr, bool *reloaded)
{
        uint32_t idx = fp_maps_find(w->maps, addr);
        uint64_t gap, now;

        if (idx || *reloaded)
                return idx;
        *reloaded = true;
        gap = w->maps_reload_gap_ns ? w->maps_reload_gap_ns : FP_MAPS_RELOAD_GAP_MIN_NS;
        now = fp_now_ns(CLOCK_MONOTONIC);
        if (!w->may_reload || now - w->maps_reload_ns <= gap)
                return 0;
        w->maps_reload_ns = now;
        w->maps_reloads++;
        size_t known = fp_maps_count(w->maps);
        (void)fp_maps_load_proc(w->maps);
        idx = fp_maps_find(w->maps, addr);
        /* Found, or new code beside it (a JIT's mprotect has no record): soon again. */
        if (idx || fp_maps_count(w->maps) > known)
                w->maps_reload_gap_ns = FP_MAPS_RELOAD_GAP_MIN_NS;
        else
                w->maps_reload_gap_ns =
                    gap >= FP_MAPS_RELOAD_GAP_MAX_NS / 2 ? FP_MAPS_RELOAD_GAP_MAX_NS : gap * 2;
        return idx;
}

void fp_stackwalk_resolve(void *userdata, struct fp_frame *frames, uint32_t n)
{
        struct fp_stackwalk *w = userdata;
        bool reloaded = false;

        for (uint32_t i = 0; i < n; i++) {
                if (frames[i].flags & FP_FRAME_JAVA) {
                        (void)w->java_method(w->jit_ctx, frames[i].addr); /* read while it lives */
                        continue;
                }
                if (frames[i].flags) /* synthetic ([kernel], [truncated], ...) or a runtime's */
                        continue;
                frames[i].mapping = find_mapping(w, frames[i].addr, &reloaded);
                if (!frames[i].mapping) {
                        w->st->unresolved++;
                        continue;
                }
                /* Load the symbols (or the perf map) while the file is surely still there. */
                if (w->jit_name && fp_maps_get(w->maps, frames[i].mapping)->kind == FP_MAPPING_ANON)
                        (void)w->jit_name(w->jit_ctx, frames[i].addr);
                else
                        (void)fp_maps_symbolize(w->maps, frames[i].mapping, frames[i].addr, NULL);
        }
}

/*
 * Whether JIT code named name (NULL: not named yet) may be a compiled
 * method, which without -XX:+PreserveFramePointer keeps no frame pointer:
 * a JVM's perf map names one "RET Class.method(ARGS)", while the
 * interpreter and the stubs that call into Java ("Interpreter",
 * "StubRoutines (1)") keep theirs with or without the flag.
 */
static bool compiled_method(const char *name)
{
        size_t n = name ? strlen(name) : 0;
        const char *paren = name ? strchr(name, '(') : NULL;

        if (!name)
                return true;
        return paren && name[n - 1] == ')' && memchr(name, ' ', (size_t)(paren - name)) &&
               memchr(name, '.', (size_t)(paren - name));
}

/* The unwinder's view of a code address: its mapping's CFI table, or none. */
static void lookup_code(void *userdata, uint64_t ip, struct fp_unwind_code *ret)
{
        struct fp_stackwalk *w = userdata;
        bool reloaded = false;
        uint32_t idx = find_mapping(w, ip, &reloaded);
        struct fp_mapping *x;
        struct fp_symtab *st;

        *ret = (struct fp_unwind_code){0};
        if (!idx)
                return;
        x = fp_maps_get(w->maps, idx);
        if (x->kind == FP_MAPPING_ANON && w->jvm && w->jvm->state > 0) {
                struct fp_hotspot_code code;
                if (w->java_code && w->java_code(w->jit_ctx, ip, ip == w->leaf_ip, &code) > 0) {
                        /* A compiled method's frame by its size; unknown ones end the walk. */
                        if (code.frame == FP_HOTSPOT_FRAME_SIZE) {
                                ret->has_row = true;
                                ret->row = (struct fp_cfi_row){
                                    .cfa = FP_CFI_CFA_SP,
                                    .cfa_off = (int32_t)code.cfa,
                                    .rbp_off = (int16_t)code.rbp_off,
                                    .flags = code.rbp_saved ? FP_CFI_RBP_SAVED : 0};
                        }
                        ret->no_frame_pointer = code.frame == FP_HOTSPOT_FRAME_UNKNOWN;
                        return;
                }
                if (w->jvm->frame_pointers == 0)
                        ret->no_frame_pointer =
                            compiled_method(w->jit_name ? w->jit_name(w->jit_ctx, ip) : NULL);
        }
        if (x->kind != FP_MAPPING_FILE && x->kind != FP_MAPPING_VDSO)
                return;
        ret->file_backed = true;
        st = fp_maps_symtab(w->maps, idx);
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
 * The frames of a user frame of a sample, at code address ip whose rbp was
 * bp, into f from n on (at most max): a JVM's compiled method becomes its
 * methods' FP_FRAME_JAVA frames (their Method*), what was inlined there
 * first; an interpreted method its own, when ip is the JVM's interpreter and
 * the frame's method slot is in the stack copy; anything else a code frame.
 * Returns the new n.
 */
static uint32_t user_frame(struct fp_stackwalk *w, const struct fp_perf_sample *s,
                           struct fp_frame *f, uint32_t n, uint32_t max, uint64_t ip, uint64_t bp)
{
        uint64_t at = bp + (uint64_t)(int64_t)HOTSPOT_FRAME_METHOD_OFFSET, method = 0;
        struct fp_hotspot_code code;
        const char *name = NULL;

        /* (Only a JVM's: no other process pays a look per frame.) */
        if (!w->java_method || !w->jvm || w->jvm->state <= 0)
                goto native;
        uint32_t idx = fp_maps_find(w->maps, ip);
        struct fp_mapping *x = idx ? fp_maps_get(w->maps, idx) : NULL;
        if (!x || x->kind != FP_MAPPING_ANON)
                goto native;
        /* (Its names only: the frame was stepped already, a leaf's code read then.) */
        if (w->java_code && w->java_code(w->jit_ctx, ip, false, &code) > 0) {
                if (code.compiled) {
                        for (unsigned k = 0; k < code.n_methods && n < max; k++)
                                f[n++] = (struct fp_frame){.addr = code.methods[k],
                                                           .flags = FP_FRAME_JAVA};
                        return n;
                }
                name = code.name;
        } else if (w->jit_name) {
                name = w->jit_name(w->jit_ctx, ip);
        }
        if (!name || strcmp(name, "Interpreter") != 0 || !s->stack || at < s->user_sp ||
            at - s->user_sp > s->stack_size || s->stack_size - (at - s->user_sp) < 8)
                goto native;
        memcpy(&method, s->stack + (at - s->user_sp), 8);
        if (!method)
                goto native;
        f[n++] = (struct fp_frame){.addr = method, .flags = FP_FRAME_JAVA};
        return n;
native:
        f[n] = code_frame(n, ip);
        return n + 1;
}

/*
 * The user part of a sample's stack into f (n frames so far), from the
 * stack copy (auto, dwarf), or from the kernel's frame-pointer callchain
 * with the leaf fixed up (fp). Returns the new n.
 */
static uint32_t user_frames(struct fp_stackwalk *w, const struct fp_perf_sample *s,
                            struct fp_frame *f, uint32_t n, const uint64_t *chain, size_t n_chain)
{
        struct fp_unwind_regs regs = {s->user_ip, s->user_sp, s->user_bp};
        uint64_t ips[FP_STACKWALK_MAX_FRAMES], bps[FP_STACKWALK_MAX_FRAMES];
        size_t n_ips = 0;

        w->st->stack_bytes += s->stack_size;
        if (w->cfg->unwind == FP_UNWIND_FP || !s->has_regs) {
                uint64_t ra;
                for (size_t i = 0; i < n_chain && n_ips < FP_STACKWALK_MAX_FRAMES; i++)
                        ips[n_ips++] = chain[i];
                if (s->has_regs && n_ips && ips[0] == s->user_ip &&
                    n_ips < FP_STACKWALK_MAX_FRAMES &&
                    fp_unwind_fix_leaf(&regs, s->stack, s->stack_size, lookup_code, w,
                                       n_ips > 1 ? ips[1] : 0, &ra)) {
                        memmove(ips + 2, ips + 1, (n_ips - 1) * sizeof(ips[0]));
                        ips[1] = ra;
                        n_ips++;
                        w->st->leaf_fixups++;
                }
        } else {
                struct fp_unwind_result res;
                w->leaf_ip = s->user_ip;
                fp_unwind_user(w->cfg->unwind, &regs, s->stack, s->stack_size, lookup_code, w, ips,
                               bps, FP_STACKWALK_MAX_FRAMES - n - 1, &res);
                n_ips = res.n;
                w->st->frames_cfi += res.by_cfi;
                w->st->frames_fp += res.by_fp;
                w->st->frames_java += res.by_given;
                if (res.end == FP_UNWIND_END_ROOT) {
                        w->st->unwound_root++;
                        w->fit.roots++;
                        if (res.reach > w->fit.reach_max)
                                w->fit.reach_max = res.reach;
                } else if (res.end == FP_UNWIND_END_STACK_SHORT) {
                        w->st->stack_copy_short++;
                        w->fit.shorts++;
                } else if (res.end == FP_UNWIND_END_NO_FP) {
                        w->st->jit_no_fp++;
                } else {
                        w->st->unwind_failed++;
                }
                /* The language runtimes' frames among them, all at once (runtimes.h). */
                struct fp_rt_frame_at at[FP_STACKWALK_MAX_FRAMES];
                struct fp_frame rt[FP_STACKWALK_MAX_FRAMES];
                bool is_rt[FP_STACKWALK_MAX_FRAMES] = {false};
                if (!w->cfg->no_javascript) {
                        for (size_t i = 0; i < n_ips; i++)
                                at[i] = (struct fp_rt_frame_at){.ip = ips[i],
                                                                .bp = bps[i],
                                                                .stack = s->stack,
                                                                .sp = s->user_sp,
                                                                .size = s->stack_size};
                        (void)fp_runtimes_frames(w->maps, at, n_ips, rt, is_rt);
                }
                for (size_t i = 0; i < n_ips && n < FP_STACKWALK_MAX_FRAMES - 1; i++)
                        n = is_rt[i] ? (f[n] = rt[i], n + 1)
                                     : user_frame(w, s, f, n, FP_STACKWALK_MAX_FRAMES - 1, ips[i],
                                                  bps[i]);
                if (res.end != FP_UNWIND_END_ROOT)
                        f[n++] = (struct fp_frame){.flags = FP_FRAME_TRUNCATED};
                return n;
        }
        for (size_t i = 0; i < n_ips && n < FP_STACKWALK_MAX_FRAMES; i++, n++)
                f[n] = code_frame(n, ips[i]);
        return n;
}

/* Half as much again as the deepest stack, a kilobyte more, in 512-byte steps, within bounds. */
static uint32_t fit_with_margin(uint64_t reach)
{
        uint64_t want = (reach + reach / 2 + 1024 + 511) / 512 * 512;
        return want < FP_STACKFIT_MIN   ? FP_STACKFIT_MIN
               : want > FP_STACKFIT_MAX ? FP_STACKFIT_MAX
                                        : (uint32_t)want;
}

uint32_t fp_stackfit_size(const struct fp_stackfit *f, uint32_t cur)
{
        uint32_t want = fit_with_margin(f->reach_max);

        if (f->shorts && cur < FP_STACKFIT_MAX) {
                uint32_t grown = cur > FP_STACKFIT_MAX / 2 ? FP_STACKFIT_MAX : cur * 2;
                return want > grown ? want : grown;
        }
        /* Smaller by a quarter at least: a reopen of every thread is not worth less. */
        if (f->roots >= (uint64_t)FP_STACKFIT_LEARN << (f->grows < 8 ? f->grows : 8) &&
            !f->shorts && want <= cur / 4 * 3)
                return want;
        return cur;
}

uint32_t fp_stackwalk(struct fp_stackwalk *w, const struct fp_perf_sample *s, struct fp_frame *f)
{
        uint32_t n = 0;
        uint64_t context = PERF_CONTEXT_USER;
        bool in_kernel = (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
        uint32_t first_real;
        const uint64_t *user = NULL;
        size_t n_user = 0;

        /* Time spent in the kernel with kernel frames excluded: one synthetic leaf. */
        if (in_kernel && !w->cfg->kernel_frames)
                f[n++] = (struct fp_frame){.flags = FP_FRAME_KERNEL_TIME};
        first_real = n;

        for (uint64_t i = 0; i < s->nr && n < FP_STACKWALK_MAX_FRAMES; i++) {
                uint64_t ip = s->ips[i];
                if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
                        context = ip;
                        if (context == PERF_CONTEXT_USER && w->cfg->stack_bytes) {
                                /* The user part is unwound (or fixed up) below. */
                                user = s->ips + i + 1;
                                n_user = s->nr - i - 1;
                                break;
                        }
                        continue;
                }
                if (context != PERF_CONTEXT_USER && context != PERF_CONTEXT_KERNEL)
                        continue;
                if (context == PERF_CONTEXT_KERNEL && !w->cfg->kernel_frames)
                        continue;
                f[n] = code_frame(n, ip);
                n++;
        }
        if (w->cfg->stack_bytes && (s->has_regs || user))
                n = user_frames(w, s, f, n, user, n_user);
        if (n == first_real) {
                /* No callchain: keep the sample at its ip (or as [unknown]) rather than drop it. */
                w->st->unwind_empty++;
                if (n == 0 || (s->ip && w->cfg->kernel_frames))
                        f[n++] = (struct fp_frame){.addr = s->ip};
        }
        return n;
}
