/* SPDX-License-Identifier: MIT */
/*
 * What symbols.c (ELF loading, lookup) and symcache.c (the cache that
 * shares symtabs by build ID) share. Not for other modules.
 */
#pragma once

#include "symbols.h"
#include "util.h"

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUILD_ID_MAX 64 /* bytes; a longer (odd) note is treated as no build ID */
#define KEY_MAX      (2 * BUILD_ID_MAX + 1)

static inline void elf_endp(Elf **e)
{
        if (*e)
                elf_end(*e);
}

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

/* Lower-case hex build ID of elf into out (KEY_MAX bytes), "" when none. */
void fp_sym_read_build_id(Elf *elf, char *out);
/* Whether elf has a non-empty .symtab (more than the exported .dynsym). */
bool fp_sym_elf_has_symtab(Elf *elf);
/* Opens path as ELF; -ENOEXEC when it is not one. */
int fp_sym_open_elf(const char *path, int *ret_fd, Elf **ret_elf, struct stat *ret_st);
/* Builds a symtab from an open ELF whose build ID (possibly "") was already read. */
int fp_sym_load_elf(Elf *elf, const char *build_id, const char *debug_dir, bool vdso,
                    struct fp_symtab **ret);
/* The agent's own vdso image, parsed. */
int fp_sym_load_vdso(struct fp_symtab **ret);
/* Whether t came with a .symtab (its own or a debug file's), not only .dynsym. */
bool fp_sym_symtab_full(const struct fp_symtab *t);
