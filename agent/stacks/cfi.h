/* SPDX-License-Identifier: MIT */
/*
 * Compact unwind tables compiled from an ELF file's call-frame information.
 *
 * The DWARF CFI of a binary (.eh_frame, which every C and C++ binary and
 * library on Debian and RHEL carries, and .debug_frame, which Go writes,
 * compressed or not) is a program per function that a general interpreter
 * would run for every frame of every sample. fp_cfi_compile() runs those
 * programs once, when a binary is first seen, and keeps only what an x86-64
 * unwinder needs at each address: how to find the canonical frame address
 * (CFA: the caller's stack pointer) and whether the caller's rbp was saved
 * on the stack. The return address is always at CFA - 8 on x86-64; a row
 * whose program says otherwise is marked unsupported and stops the unwind
 * cleanly there. The per-sample path (unwind.c) only does binary searches
 * in the sorted rows.
 *
 * A row covers [pc, next row's pc). Row kinds:
 *
 *   FP_CFI_CFA_SP    CFA = rsp + cfa_off
 *   FP_CFI_CFA_BP    CFA = rbp + cfa_off
 *   FP_CFI_CFA_PLT   a PLT entry: CFA = rsp + 8, + 8 more when
 *                    (rip & 15) >= rbp_off, the threshold (the
 *                    DW_CFA_def_cfa_expression idiom the linker emits for
 *                    .plt; a PLT row saves no rbp and has no flags)
 *   FP_CFI_NONE      no CFI covers these addresses
 *   FP_CFI_UNSUPPORTED  CFI that this table cannot express (an expression,
 *                    the return address in a register, ...)
 *
 * flags: FP_CFI_RBP_SAVED (the caller's rbp is at CFA + rbp_off),
 * FP_CFI_RA_UNDEFINED (the outermost frame of a thread: _start, clone3).
 *
 * Tables are immutable once built, so they may be shared between threads
 * and cached per build ID (symbols.c keeps one per symbol table).
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

enum {
        FP_CFI_NONE = 0,
        FP_CFI_CFA_SP,
        FP_CFI_CFA_BP,
        FP_CFI_CFA_PLT,
        FP_CFI_UNSUPPORTED,
};

#define FP_CFI_RBP_SAVED    0x1
#define FP_CFI_RA_UNDEFINED 0x2

struct fp_cfi_row {
        uint64_t pc; /* ELF virtual address */
        int32_t cfa_off;
        int16_t rbp_off; /* FP_CFI_CFA_PLT rows: the threshold */
        uint8_t cfa;     /* FP_CFI_* kind */
        uint8_t flags;   /* FP_CFI_RBP_SAVED, FP_CFI_RA_UNDEFINED */
};

struct fp_cfi;

/*
 * Compiles elf's .eh_frame and .debug_frame (both when present: rows of
 * .eh_frame win where they overlap). -ENODATA when elf has neither,
 * -EBADMSG when what it has is malformed beyond use (rows parsed before the
 * damage are kept when there are any), -ENOMEM. *ret is the caller's.
 */
int fp_cfi_compile(Elf *elf, struct fp_cfi **ret);
/* The same for the ELF file at path (opened read-only, not blocking). */
int fp_cfi_compile_file(const char *path, struct fp_cfi **ret);
void fp_cfi_free(struct fp_cfi *c);

size_t fp_cfi_n_rows(const struct fp_cfi *c);
/* The memory c holds, in bytes. */
size_t fp_cfi_bytes(const struct fp_cfi *c);
const struct fp_cfi_row *fp_cfi_row(const struct fp_cfi *c, size_t i);
/* The row covering vaddr, or NULL when vaddr is before the first row. */
const struct fp_cfi_row *fp_cfi_find(const struct fp_cfi *c, uint64_t vaddr);
