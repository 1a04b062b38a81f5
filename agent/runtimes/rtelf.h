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
/*
 * Calls fn with each relocation of elf's SHT_RELA sections and the name of
 * its symbol (NULL for a relocation of none, as one of the file's own TLS
 * block).
 */
void fp_rt_elf_relocs(Elf *elf, void (*fn)(void *userdata, const GElf_Rela *r, const char *sym),
                      void *userdata);
/* len bytes of process pid's memory at addr: 0, -EFAULT (not mapped, short) or -errno. */
int fp_rt_peek(pid_t pid, uint64_t addr, void *buf, size_t len);
/*
 * The NUL-terminated string at addr in process pid into buf (len bytes,
 * NUL-terminated): 0; -E2BIG when it was longer (buf holds its first len -
 * 1 bytes); -EFAULT when it did not read. Read a page at most at a time,
 * so a string that ends just before an unmapped page reads.
 */
int fp_rt_peek_cstr(pid_t pid, uint64_t addr, char *buf, size_t len);
