/* SPDX-License-Identifier: MIT */
/*
 * A stripped binary's names from elsewhere on the host, found the way gdb
 * and perf find them:
 *
 *   1. its separate debug file by build ID, DEBUG_DIR/.build-id/xx/rest.debug
 *      (Debian's -dbgsym packages, Fedora's -debuginfo), in the target's
 *      own mount namespace first (/proc/PID/root/usr/lib/debug), then the
 *      agent's debug directory;
 *   2. its .gnu_debuglink (a file name and a CRC-32): beside the binary,
 *      in its .debug/ folder, and under the debug directory at the
 *      binary's own folder;
 *   3. its .gnu_debugdata section, MiniDebugInfo (what Fedora and RHEL
 *      ship in every binary): an xz-compressed ELF holding the function
 *      symbols that .dynsym lacks.
 *
 * Every file found is the profiled process's filesystem's, so it is read
 * as hostile input, with the binary's own rules: opened without following
 * a final symlink and without blocking, a regular file, owned by root or
 * the binary's owner and writable by nobody else, and its build ID equal
 * to the binary's (or, for a binary without one, its CRC-32 the
 * debuglink's). MiniDebugInfo is decompressed to at most
 * FP_DEBUG_MINI_MAX bytes.
 */
#pragma once

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_DEBUG_MINI_MAX    (64u << 20)  /* MiniDebugInfo decompressed */
#define FP_DEBUG_CRC_MAX     (256u << 20) /* a debuglinked file's bytes checked by CRC */
#define FP_DEBUG_DIR_DEFAULT "/usr/lib/debug"

/* Where a symbol table's names came from (symbols.h counts them by this). */
enum fp_sym_source {
        FP_SYM_SOURCE_DYNSYM = 0, /* only the exported .dynsym */
        FP_SYM_SOURCE_SYMTAB,     /* the binary's own .symtab */
        FP_SYM_SOURCE_BUILD_ID,   /* a debug file found by build ID */
        FP_SYM_SOURCE_DEBUGLINK,  /* a debug file found by .gnu_debuglink */
        FP_SYM_SOURCE_MINIDEBUG,  /* .gnu_debugdata */
        FP_SYM_SOURCE_PCLNTAB,    /* a stripped Go binary's .gopclntab (gopclntab.h) */
        FP_SYM_SOURCES,
};

/* "dynsym", "symtab", "build_id", "debuglink", "minidebuginfo", "pclntab" */
const char *fp_sym_source_name(enum fp_sym_source s);

/* An ELF opened from elsewhere: close with fp_debug_close(). */
struct fp_debug_elf {
        int fd; /* -1 for one in memory */
        Elf *elf;
        void *image; /* the decompressed MiniDebugInfo, or NULL */
};

void fp_debug_close(struct fp_debug_elf *d);

/*
 * The separate debug file of the binary at path (as it was opened, e.g.
 * /proc/PID/root/usr/bin/x), elf, with build_id ("" if none), owned by
 * owner: by build ID, then by debuglink (above). debug_dir: the agent's
 * (NULL: none). 1 and *ret (with *ret_source) when found, 0 when not,
 * -ENOMEM.
 */
int fp_debug_find(const char *path, Elf *elf, const char *build_id, const char *debug_dir,
                  uid_t owner, struct fp_debug_elf *ret, enum fp_sym_source *ret_source);

/*
 * elf's MiniDebugInfo as an ELF in memory: 1 and *ret, 0 when it has none
 * (or a damaged or oversized one), -ENOMEM.
 */
int fp_debug_minidebuginfo(Elf *elf, struct fp_debug_elf *ret);
