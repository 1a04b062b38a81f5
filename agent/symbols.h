/* SPDX-License-Identifier: MIT */
/*
 * ELF symbol tables, cached per build ID.
 *
 * A struct fp_symtab holds the function symbols of one ELF object (.symtab
 * and .dynsym merged, plus a separate debug file under
 * /usr/lib/debug/.build-id when one is installed), sorted by address, and
 * its PT_LOAD segments so that a file offset from /proc/PID/maps can be
 * turned into the ELF virtual address the symbols use. It is immutable
 * once loaded and reference counted, so profiles stay symbolizable after
 * the process (or even the file) is gone.
 *
 * struct fp_symcache hands out symtabs keyed by build ID (or, for objects
 * without one, by device, inode, size and mtime), so ten processes of one
 * binary parse it once. It also provides the vdso (read from the agent's
 * own auxiliary vector: the kernel maps the same image into every
 * process) and the kernel's symbols from /proc/kallsyms.
 *
 * Functions that can fail return 0 on success and -errno on failure.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct fp_symtab;
struct fp_symcache;

struct fp_symcache *fp_symcache_new(void);
/* Drops the cache's references; symtabs still held elsewhere stay valid. */
void fp_symcache_free(struct fp_symcache *c);

/*
 * Returns (a new reference to) the symtab of the ELF file at path, loading
 * it on first use. path is opened as given: callers pass
 * /proc/PID/root/<file> so files in other mount namespaces work.
 * -ENOENT/-EACCES when it cannot be opened, -ENOEXEC when it is not ELF.
 */
int fp_symcache_get(struct fp_symcache *c, const char *path, struct fp_symtab **ret);
/* The vdso's symtab (new reference). */
int fp_symcache_get_vdso(struct fp_symcache *c, struct fp_symtab **ret);
/* The kernel's symtab from /proc/kallsyms (new reference); -EACCES when addresses are hidden. */
int fp_symcache_get_kernel(struct fp_symcache *c, struct fp_symtab **ret);
/* Number of ELF files parsed so far (cache misses), for tests and status. */
size_t fp_symcache_n_loaded(const struct fp_symcache *c);

struct fp_symtab *fp_symtab_ref(struct fp_symtab *t);
void fp_symtab_unref(struct fp_symtab *t);

/* Lower-case hex build ID, "" when the object has none. */
const char *fp_symtab_build_id(const struct fp_symtab *t);
size_t fp_symtab_n_symbols(const struct fp_symtab *t);

/*
 * Turns a file offset (address - map start + map pgoff) into an ELF
 * virtual address using the PT_LOAD segment containing it; -ENOENT when no
 * segment does. For the kernel and the vdso, offsets are virtual addresses
 * relative to the image base as documented on each getter.
 */
int fp_symtab_offset_to_vaddr(const struct fp_symtab *t, uint64_t file_offset,
                              uint64_t *ret_vaddr);

/*
 * Name of the function containing vaddr, or NULL. A symbol with size 0
 * covers up to the next symbol; an address past the last symbol's end or
 * before the first symbol resolves to NULL. *ret_start (when non-NULL) gets
 * the symbol's start address.
 */
const char *fp_symtab_lookup(const struct fp_symtab *t, uint64_t vaddr, uint64_t *ret_start);
