/* SPDX-License-Identifier: MIT */
/*
 * Unwinding a user stack from a sample's registers and a copy of the top
 * of the stack (PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER), with the
 * compact CFI tables of cfi.h. x86-64.
 *
 * Modes (agentctl start --unwind):
 *
 *   fp     the kernel's frame-pointer callchain, plus the leaf fix-up: a
 *          sample in a leaf that saves no frame pointer, or in a prologue or
 *          epilogue, skips its caller in a frame-pointer walk; the leaf's
 *          CFI row says where its return address really is, and that
 *          caller is put back (fp_unwind_fix_leaf()). Needs only a small
 *          stack copy (FP_UNWIND_LEAF_BYTES).
 *   dwarf  every frame through the CFI tables; a frame without CFI ends
 *          the stack (truncated).
 *   auto   (default) CFI where the code has it, the frame-pointer chain
 *          where it has none (JIT code in anonymous memory, which runtimes
 *          that write perf maps compile with frame pointers). On a
 *          distribution without frame pointers this is what gets callers
 *          right; on code with both, CFI is exact in prologues and leaves
 *          where frame pointers are not.
 *
 * The stack copy. The kernel copies stack_bytes from the sampled rsp
 * upwards, fewer when the stack's mapping ends first (its dyn_size), so a
 * generous size costs only where stacks are deep. How much was needed was
 * measured with this agent on Debian's own programs (tests/bench/
 * unwind-cost.sh and test-unwind.sh report bytes copied per sample): xz,
 * perl and python3 in a 40-deep recursion copy 2.7 to 8.6 KiB on average
 * and reach their root in every sample within that; 16 KiB
 * (FP_PERF_STACK_BYTES) leaves room for deeper native stacks, stays a
 * quarter of perf's 64 KiB record limit, and a stack deeper still ends as
 * stack_copy_short, counted. perf's own default is 8 KiB.
 *
 * The unwinder is a pure function of its inputs: no allocation, no system
 * call; the lookup callback maps an address to its table.
 */
#pragma once

#include "cfi.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fp_unwind_mode {
        FP_UNWIND_AUTO = 0,
        FP_UNWIND_FP,
        FP_UNWIND_DWARF,
};

/* "auto", "fp", "dwarf" */
const char *fp_unwind_mode_name(unsigned mode);
/* 0 and the mode, or -EINVAL for an unknown name. */
int fp_unwind_mode_parse(const char *name, unsigned *ret);

#define FP_UNWIND_LEAF_BYTES 2048 /* the fp mode's stack copy: enough for a leaf's frame */

/* Where the unwind of one stack ended. */
enum fp_unwind_end {
        FP_UNWIND_END_ROOT,        /* the thread's outermost frame (or a zero return address) */
        FP_UNWIND_END_FAILED,      /* no usable rule: no CFI where dwarf needs it, a bad rule */
        FP_UNWIND_END_STACK_SHORT, /* a value lay beyond the stack copy */
        FP_UNWIND_END_DEPTH,       /* max frames reached */
        FP_UNWIND_END_NO_FP,       /* at JIT code compiled without frame pointers */
};

/* What the lookup tells of one code address. */
struct fp_unwind_code {
        const struct fp_cfi *cfi; /* NULL: no table for it */
        uint64_t vaddr;           /* the address in the table's (the ELF's) terms */
        bool file_backed;         /* in a mapped file (else anonymous: JIT, or unknown) */
        /*
         * Anonymous code known to keep no frame pointer (a JVM's compiled
         * methods without -XX:+PreserveFramePointer): its caller cannot be
         * found, and the walk ends there (FP_UNWIND_END_NO_FP) rather than
         * follow rbp, which holds any value, to a wrong caller.
         */
        bool no_frame_pointer;
        /*
         * A row given for this address itself (has_row), when no table
         * holds its code: a JVM's compiled method, whose frame size its
         * code cache tells. It is used as a CFI row would be.
         */
        bool has_row;
        struct fp_cfi_row row;
};

typedef void (*fp_unwind_lookup_fn)(void *userdata, uint64_t ip, struct fp_unwind_code *ret);

struct fp_unwind_regs {
        uint64_t ip, sp, bp;
};

struct fp_unwind_result {
        size_t n; /* addresses written: ips[0] the leaf, then return addresses */
        enum fp_unwind_end end;
        unsigned by_cfi, by_fp; /* frames stepped with a CFI row, with the frame pointer */
        unsigned by_given;      /* frames stepped with a row the lookup gave (has_row) */
        uint64_t reach;         /* bytes of the stack copy (from sp up) the unwind read */
};

/*
 * Unwinds the user stack whose registers are regs and whose top stack_size
 * bytes (from regs->sp up) are at stack, writing at most max addresses to
 * ips and, when bps is not NULL, each frame's rbp as the walk had it to bps
 * (where an interpreter keeps its frame's facts). mode is FP_UNWIND_AUTO
 * or FP_UNWIND_DWARF.
 */
void fp_unwind_user(unsigned mode, const struct fp_unwind_regs *regs, const uint8_t *stack,
                    uint64_t stack_size, fp_unwind_lookup_fn lookup, void *userdata, uint64_t *ips,
                    uint64_t *bps, size_t max, struct fp_unwind_result *ret);

/*
 * The leaf fix-up of a frame-pointer callchain (fp mode): the return
 * address of the leaf at regs->ip as its CFI row gives it, when the row
 * has the CFA relative to rsp (no frame set up), read from the stack copy.
 * Returns true and *ret_ra when the caller must be inserted after the
 * leaf: the chain's next address (chain_next, 0 when none) is not it.
 */
bool fp_unwind_fix_leaf(const struct fp_unwind_regs *regs, const uint8_t *stack,
                        uint64_t stack_size, fp_unwind_lookup_fn lookup, void *userdata,
                        uint64_t chain_next, uint64_t *ret_ra);
