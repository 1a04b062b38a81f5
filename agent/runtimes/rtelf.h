/* SPDX-License-Identifier: MIT */
/*
 * What the runtimes' recognisers and readers share (rtelf.c): a file's
 * symbols and initial data, and a live process's memory.
 */
#pragma once

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Calls fn with each defined symbol of elf's .symtab and .dynsym (those of
 * address 0 left out, but for thread-local ones: offset 0 in their block).
 */
void fp_rt_elf_symbols(Elf *elf, void (*fn)(void *userdata, const char *name, const GElf_Sym *s),
                       void *userdata);
/*
 * The len bytes at link-time address vaddr, from the allocated section
 * holding them (zeros in one of no bits, as .bss): false when none does.
 */
bool fp_rt_elf_read(Elf *elf, uint64_t vaddr, void *buf, size_t len);
/* len bytes of process pid's memory at addr: 0, -EFAULT (not mapped, short) or -errno. */
int fp_rt_peek(pid_t pid, uint64_t addr, void *buf, size_t len);
