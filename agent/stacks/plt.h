/* SPDX-License-Identifier: MIT */
/*
 * Names for PLT entries: the stubs through which a program or library
 * calls a function of another object (or an exported one of its own).
 * They carry no symbols, so a sample in one would read `libfoo.so+0x28f10`;
 * perf and objdump name them `func@plt`, and so does this module.
 *
 * An x86-64 PLT entry is found by what it is, not by its position: each
 * 8- or 16-byte entry of .plt, .plt.sec and .plt.got holds an indirect
 * jump through its GOT slot, `jmp *disp32(%rip)` (ff 25), perhaps after
 * an `endbr64` (f3 0f 1e fa) and with a `bnd` prefix (f2); the slot's
 * relocation (R_X86_64_JUMP_SLOT in .rela.plt, R_X86_64_GLOB_DAT in
 * .rela.dyn for .plt.got) names the function, or, for an
 * R_X86_64_IRELATIVE slot (a library's calls to its own IFUNCs: libc's
 * memcpy, strlen), the STT_GNU_IFUNC symbol whose resolver the relocation
 * names. A lazy .plt entry of an IBT
 * build has no such jump (`endbr64; push $index; bnd jmp .plt0`): its
 * `push` gives the .rela.plt index instead. The first .plt entry (the
 * resolver's) names nothing and is left unnamed.
 *
 * The ELF is the profiled process's file, so it is hostile input: every
 * offset is checked against its section, and at most FP_PLT_MAX_ENTRIES
 * entries are named per file.
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

#define FP_PLT_MAX_ENTRIES (1u << 18)

/* One named entry: [start, start + size) in the ELF's virtual addresses; name ends in "@plt". */
typedef int (*fp_plt_fn)(void *userdata, uint64_t start, uint64_t size, const char *name,
                         size_t name_len);

/*
 * Calls fn for each PLT entry of elf (x86-64 only; other machines have
 * none named) whose function can be named. Returns 0, or the first
 * negative value fn returned, or -ENOMEM.
 */
int fp_plt_collect(Elf *elf, fp_plt_fn fn, void *userdata);
