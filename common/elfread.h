/* SPDX-License-Identifier: MIT */
/*
 * ELF files read as hostile input, by both programs: opening one, its
 * build ID, a section, its function symbols (elfread.c).
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <sys/stat.h>

#define FP_ELF_BUILD_ID_MAX 64                            /* bytes; longer: no build ID */
#define FP_ELF_BUILD_ID_HEX (2 * FP_ELF_BUILD_ID_MAX + 1) /* its hex, with the NUL */

/* n bytes at p as lower-case hex into out (2n + 1 bytes). */
void fp_elf_hex(const unsigned char *p, size_t n, char *out);
/* Lower-case hex build ID of elf into out (FP_ELF_BUILD_ID_HEX bytes), "" when none. */
void fp_elf_build_id(Elf *elf, char *out);
/* The data of elf's PROGBITS section named name (*ret_sh its header), or NULL. */
Elf_Data *fp_elf_section(Elf *elf, const char *name, GElf_Shdr *ret_sh);
/* Whether elf has a non-empty .symtab (more than the exported .dynsym). */
bool fp_elf_has_symtab(Elf *elf);
/*
 * Opens path as an ELF file for reading: 0 with *ret_fd and *ret_elf the
 * caller's (and *ret_st, when not NULL, the file's); -ENOEXEC when it is
 * not an ELF file, -EISDIR, another -errno.
 */
int fp_elf_open(const char *path, int *ret_fd, Elf **ret_elf, struct stat *ret_st);

/*
 * Calls fn(arg, sym, name) for each function symbol (STT_FUNC or
 * STT_GNU_IFUNC, defined, at a non-zero address, with a name) of elf's
 * .symtab and, unless symtab_only, .dynsym sections, in file order; a
 * negative return of fn stops the walk and is returned. Malformed tables
 * end their own walk. *ret_has_symtab (may be NULL) tells whether a
 * non-empty .symtab was seen. 0 or fn's error.
 */
typedef int (*fp_elf_function_fn)(void *arg, const GElf_Sym *sym, const char *name);
int fp_elf_functions(Elf *elf, bool symtab_only, fp_elf_function_fn fn, void *arg,
                     bool *ret_has_symtab);
