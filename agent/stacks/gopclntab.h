/* SPDX-License-Identifier: MIT */
/*
 * Function names of a Go binary from its .gopclntab: the table the Go
 * runtime itself keeps to name frames in panics and profiles, which
 * `go build -ldflags='-s -w'` leaves in place when it strips the symbol
 * table and DWARF. Read as Go 1.16 to 1.2x lay it out:
 *
 *   header   magic (0xfffffffa: 1.16-1.17, 0xfffffff0: 1.18-1.19,
 *            0xfffffff1: 1.20+), two pad bytes, the minimum instruction
 *            size, the pointer size; then pointer-sized words: nfunc,
 *            nfiles, textStart (1.18+), and the offsets from the header of
 *            funcnametab, cutab, filetab, pctab and the function table;
 *   functab  nfunc + 1 pairs (entry, offset of the function's _func): two
 *            uint32 from 1.18 on (entry relative to textStart), two
 *            pointer-sized words before;
 *   _func    its entry (as in functab), then nameOff (int32) into
 *            funcnametab, a NUL-terminated name.
 *
 *   pctab    the pc-value tables: from a function's entry, pairs of varints
 *            (a zig-zag delta of the value, which starts at -1; a count of
 *            minimum instruction sizes the value holds for), ended by a
 *            zero value delta after the first pair.
 *
 * A function spans from its entry to the next one's. A PIE's table is the
 * same in a section named .data.rel.ro.gopclntab.
 *
 * Inlined frames, Go 1.18 on. The compiler records, per function, a tree
 * of the calls it inlined (FUNCDATA_InlTree) and, per pc, the innermost
 * one it runs (PCDATA_InlTreeIndex, -1: none). An _func's fixed part
 * (entryOff, nameOff, args, deferreturn, pcsp, pcfile, pcln, npcdata,
 * cuOffset, startLine from 1.20, funcID, flag, a pad byte, nfuncdata) is
 * followed by npcdata uint32 offsets into pctab and nfuncdata uint32
 * offsets from moduledata.gofunc (0xffffffff: none). A tree entry
 * (inlinedCall) names the callee (nameOff, as an _func's) and the caller's
 * pc where the call was (parentPc, from the entry): that pc's own index is
 * the next frame out. moduledata is found in the writable data as the
 * word holding the table's address, its funcnametab and text agreeing.
 *
 * The section is the profiled process's file: every offset is checked
 * against it, at most FP_GOPCLN_MAX_FUNCS functions are named, names are
 * cut at FP_GOPCLN_MAX_NAME, inline chains at FP_GOPCLN_MAX_INLINE.
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

#define FP_GOPCLN_MAX_FUNCS  (1u << 22)
#define FP_GOPCLN_MAX_NAME   1024
#define FP_GOPCLN_MAX_INLINE 16        /* inlined calls named at one pc */
#define FP_GOPCLN_MAX_RANGES (1 << 22) /* inlined ranges read from one file */

/* One function: [start, start + size) in the ELF's virtual addresses. */
typedef int (*fp_gopcln_fn)(void *userdata, uint64_t start, uint64_t size, const char *name,
                            size_t name_len);

/*
 * Calls fn for each function of elf's .gopclntab. The number named (0
 * when elf has no .gopclntab or one of a layout not understood), or the
 * first negative value fn returned.
 */
int fp_gopclntab_collect(Elf *elf, fp_gopcln_fn fn, void *userdata);

/*
 * One range of code run inlined: [start, start + size) in the ELF's
 * virtual addresses runs names[0], inlined into names[1], ... inlined into
 * names[n - 1], inlined into the function fp_gopclntab_collect names there
 * (which is not among them). Names are not NUL-terminated: lens[i] bytes.
 */
typedef int (*fp_gopcln_inl_fn)(void *userdata, uint64_t start, uint64_t size,
                                const char *const *names, const size_t *lens, unsigned n);

/*
 * Calls fn for each inlined range of elf's .gopclntab, in address order.
 * The number of ranges (0 when elf has no table, one before Go 1.18, or no
 * moduledata found), -ENOMEM, or the first negative value fn returned.
 */
int fp_gopclntab_inlined(Elf *elf, fp_gopcln_inl_fn fn, void *userdata);
