/* SPDX-License-Identifier: MIT */
/*
 * The user-stack unwinder; see unwind.h.
 *
 * One step, for the frame executing at pc with registers sp and bp:
 *
 *   row = the CFI row of pc (pc - 1 for a return address: the call
 *         instruction, which may be a function's last)
 *   CFA = sp + off | bp + off | PLT: sp + 8 (+ 8 past the PLT's push)
 *   caller's pc = [CFA - 8], caller's sp = CFA,
 *   caller's bp = [CFA + rbp_off] when the row says rbp was saved, else bp
 *
 * and without a row (auto mode): CFA = bp + 16, caller's pc = [bp + 8],
 * caller's bp = [bp], except in JIT code known to keep no frame pointer,
 * where the walk ends. The walk reaches the root at a row that marks the
 * return address undefined (glibc's _start and clone3), a zero return
 * address, or a zero frame pointer in a file that has no CFI at all; it
 * fails at a zero frame pointer anywhere else, and when the stack stops
 * growing upwards (a loop).
 */
#include "unwind.h"

#include <errno.h>
#include <string.h>

const char *fp_unwind_mode_name(unsigned mode)
{
        switch (mode) {
        case FP_UNWIND_FP:
                return "fp";
        case FP_UNWIND_DWARF:
                return "dwarf";
        default:
                return "auto";
        }
}

int fp_unwind_mode_parse(const char *name, unsigned *ret)
{
        static const unsigned modes[] = {FP_UNWIND_AUTO, FP_UNWIND_FP, FP_UNWIND_DWARF};
        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
                if (strcmp(name, fp_unwind_mode_name(modes[i])) == 0) {
                        *ret = modes[i];
                        return 0;
                }
        return -EINVAL;
}

struct copy {
        const uint8_t *data;
        uint64_t base, size;
        uint64_t reach; /* bytes of the copy the loads have needed so far */
};

/* The 8 bytes at address a of the copied stack; false when outside it. */
static bool load(struct copy *c, uint64_t a, uint64_t *ret)
{
        if (a < c->base || a - c->base > c->size || c->size - (a - c->base) < 8)
                return false;
        memcpy(ret, c->data + (a - c->base), 8);
        if (a - c->base + 8 > c->reach)
                c->reach = a - c->base + 8;
        return true;
}

/*
 * The CFA a row gives for a frame at pc with registers sp and bp; false for
 * a row that gives none (no CFI, unsupported).
 */
static bool row_cfa(const struct fp_cfi_row *row, uint64_t pc, uint64_t sp, uint64_t bp,
                    uint64_t *ret)
{
        switch (row->cfa) {
        case FP_CFI_CFA_SP:
                *ret = sp + (uint64_t)(int64_t)row->cfa_off;
                return true;
        case FP_CFI_CFA_BP:
                *ret = bp + (uint64_t)(int64_t)row->cfa_off;
                return true;
        case FP_CFI_CFA_PLT:
                *ret = sp + 8 + ((pc & 15) >= (uint64_t)row->rbp_off ? 8 : 0);
                return true;
        default:
                return false;
        }
}

void fp_unwind_user(unsigned mode, const struct fp_unwind_regs *regs, const uint8_t *stack,
                    uint64_t stack_size, fp_unwind_lookup_fn lookup, void *userdata, uint64_t *ips,
                    uint64_t *bps, size_t max, struct fp_unwind_result *ret)
{
        struct copy c = {stack, regs->sp, stack ? stack_size : 0, 0};
        uint64_t pc = regs->ip, sp = regs->sp, bp = regs->bp;
        struct fp_unwind_result r = {0};

        r.end = FP_UNWIND_END_DEPTH;
        while (r.n < max) {
                struct fp_unwind_code code = {0};
                const struct fp_cfi_row *row = NULL;
                uint64_t cfa, ra, nbp = bp;
                bool guessed = false; /* a frame pointer followed in anonymous code (JIT) */

                if (bps)
                        bps[r.n] = bp;
                ips[r.n++] = pc;
                if (r.n == max)
                        break;
                lookup(userdata, r.n == 1 ? pc : pc - 1, &code);
                if (code.has_row)
                        row = &code.row;
                else if (code.cfi)
                        row = fp_cfi_find(code.cfi, code.vaddr);
                if (row && row->cfa != FP_CFI_NONE) {
                        if (row->flags & FP_CFI_RA_UNDEFINED) {
                                r.end = FP_UNWIND_END_ROOT;
                                break;
                        }
                        if (!row_cfa(row, pc, sp, bp, &cfa)) {
                                r.end = FP_UNWIND_END_FAILED;
                                break;
                        }
                        uint64_t slot = cfa + (uint64_t)(int64_t)row->rbp_off;
                        /*
                         * A slot below the sampled rsp is one an epilogue has
                         * already popped (GCC leaves the rule in place after
                         * "pop %rbp"): rbp holds its value, and the copy,
                         * which starts at rsp, does not.
                         */
                        if (!load(&c, cfa - 8, &ra) || ((row->flags & FP_CFI_RBP_SAVED) &&
                                                        slot >= c.base && !load(&c, slot, &nbp))) {
                                r.end = FP_UNWIND_END_STACK_SHORT;
                                break;
                        }
                        /* (A row given for JIT code: no thread's root is there.) */
                        guessed = code.has_row;
                        if (code.has_row)
                                r.by_given++;
                        else
                                r.by_cfi++;
                } else if (mode == FP_UNWIND_DWARF) {
                        r.end = FP_UNWIND_END_FAILED;
                        break;
                } else if (code.no_frame_pointer) {
                        r.end = FP_UNWIND_END_NO_FP;
                        break;
                } else {
                        /*
                         * No table here: follow the frame pointer. A zero rbp
                         * ends a frame-pointer chain at _start only in code
                         * built for that chain, a file without CFI; in a file
                         * with CFI but no row here, or in anonymous code
                         * (JIT), rbp is just a register that held 0.
                         */
                        if (bp == 0) {
                                r.end = code.file_backed && !code.cfi ? FP_UNWIND_END_ROOT
                                                                      : FP_UNWIND_END_FAILED;
                                break;
                        }
                        if (bp < sp || !load(&c, bp + 8, &ra) || !load(&c, bp, &nbp)) {
                                r.end = bp < sp ? FP_UNWIND_END_FAILED : FP_UNWIND_END_STACK_SHORT;
                                break;
                        }
                        cfa = bp + 16;
                        r.by_fp++;
                        guessed = !code.file_backed;
                }
                /*
                 * A zero return address ends the stack at its root, unless
                 * it was read in JIT code, which is never a thread's root:
                 * through a frame pointer JIT code may not keep (a JVM
                 * without -XX:+PreserveFramePointer: rbp is any register,
                 * and what it points at anything), or by a row the lookup
                 * gave.
                 */
                if (ra == 0) {
                        r.end = guessed ? FP_UNWIND_END_FAILED : FP_UNWIND_END_ROOT;
                        break;
                }
                if (cfa <= sp && r.n > 1) {
                        r.end = FP_UNWIND_END_FAILED; /* not moving up the stack: a loop */
                        break;
                }
                pc = ra;
                sp = cfa;
                bp = nbp;
        }
        r.reach = c.reach;
        *ret = r;
}

bool fp_unwind_fix_leaf(const struct fp_unwind_regs *regs, const uint8_t *stack,
                        uint64_t stack_size, fp_unwind_lookup_fn lookup, void *userdata,
                        uint64_t chain_next, uint64_t *ret_ra)
{
        struct copy c = {stack, regs->sp, stack ? stack_size : 0, 0};
        struct fp_unwind_code code = {0};
        const struct fp_cfi_row *row;
        uint64_t cfa, ra;

        lookup(userdata, regs->ip, &code);
        if (!code.cfi || !(row = fp_cfi_find(code.cfi, code.vaddr)))
                return false;
        /* With a frame set up (rbp-based) the chain is right already. */
        if (row->cfa == FP_CFI_CFA_BP || !row_cfa(row, regs->ip, regs->sp, regs->bp, &cfa))
                return false;
        if (!load(&c, cfa - 8, &ra) || ra == 0 || ra == chain_next)
                return false;
        *ret_ra = ra;
        return true;
}
