/* SPDX-License-Identifier: MIT */
/*
 * What symbols.c (ELF loading, lookup) and symcache.c (the cache that
 * shares symtabs by build ID) share. Not for other modules.
 */
#pragma once

#include "elfread.h"
#include "symbols.h"
#include "util.h"

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_MAX FP_ELF_BUILD_ID_HEX

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

/* Where an ELF came from: its path as opened (for its debug files) and its owner. */
struct fp_sym_origin {
        const char *path;
        uid_t owner;
};
/*
 * Builds a symtab from an open ELF whose build ID (possibly "") was already
 * read; a stripped one's names are looked for elsewhere (debugfile.h) when
 * origin is given.
 */
int fp_sym_load_elf(Elf *elf, const char *build_id, const struct fp_sym_origin *origin,
                    const char *debug_dir, bool vdso, struct fp_symtab **ret);
/* The agent's own vdso image, parsed. */
int fp_sym_load_vdso(struct fp_symtab **ret);
/* Whether t came with a .symtab (its own or a debug file's), not only .dynsym. */
bool fp_sym_symtab_full(const struct fp_symtab *t);
