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
 * A function spans from its entry to the next one's. The section is the
 * profiled process's file: every offset is checked against it, at most
 * FP_GOPCLN_MAX_FUNCS functions are named, names are cut at
 * FP_GOPCLN_MAX_NAME. Inlined frames are not expanded (the inline tree is
 * another table: the outermost function is named).
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

#define FP_GOPCLN_MAX_FUNCS (1u << 22)
#define FP_GOPCLN_MAX_NAME  1024

/* One function: [start, start + size) in the ELF's virtual addresses. */
typedef int (*fp_gopcln_fn)(void *userdata, uint64_t start, uint64_t size, const char *name,
                            size_t name_len);

/*
 * Calls fn for each function of elf's .gopclntab. The number named (0
 * when elf has no .gopclntab or one of a layout not understood), or the
 * first negative value fn returned.
 */
int fp_gopclntab_collect(Elf *elf, fp_gopcln_fn fn, void *userdata);
