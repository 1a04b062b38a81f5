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
 *
 * Threads: a symtab is immutable and its reference count atomic, so
 * symtabs may be shared and looked up from any thread. The cache itself is
 * not thread-safe; one thread (the agent's event loop) owns it.
 */
#pragma once

#include "debugfile.h"

#include <libelf.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fp_symtab;
struct fp_symcache;

struct fp_symcache *fp_symcache_new(void);
/* Drops the cache's references; symtabs still held elsewhere stay valid. */
void fp_symcache_free(struct fp_symcache *c);
/*
 * Root of the separate debug files ("/usr/lib/debug" by default): an object
 * without .symtab also gets the symbols of DIR/.build-id/xx/rest.debug when
 * that file has the same build ID. NULL disables the lookup. Affects only
 * objects loaded afterwards. 0 or -ENOMEM.
 */
int fp_symcache_set_debug_dir(struct fp_symcache *c, const char *dir);

/*
 * Returns (a new reference to) the symtab of the ELF file at path, loading
 * it on first use. path is opened as given: callers pass
 * /proc/PID/root/<file> so files in other mount namespaces work.
 * -ENOENT/-EACCES when it cannot be opened, -ENOEXEC when it is not ELF
 * (-EISDIR for a directory), -ENOMEM. *ret is untouched on failure.
 *
 * Objects are keyed by build ID, so two paths (or two containers) with one
 * build ID share a symtab and only the first is parsed; the second open
 * reads nothing but the build ID note. That holds for files root owns and
 * nobody else may write; any other file (which its owner could have
 * crafted to claim another's build ID) and objects without a build ID are
 * keyed by device, inode, size and mtime as well. A repeated get of the same path whose
 * stat() is unchanged costs one stat() and nothing else.
 *
 * With want, the file must be that one (its device and inode, before and
 * after it is opened), else -ESTALE: a process may not have the root agent
 * read, in its name, a file other than the one it mapped. Files past
 * FP_SYM_MAX_FILE_BYTES are refused (-EFBIG), and so are files of more
 * than FP_SYM_MAX_SYMBOLS function symbols (-E2BIG); every other read is
 * bounded by the file's size.
 */
struct fp_file_id {
        uint64_t dev, ino;
};
#define FP_SYM_MAX_FILE_BYTES (2ULL << 30) /* larger files are not read: -EFBIG */
#define FP_SYM_MAX_SYMBOLS    (1u << 23)   /* more function symbols in one file: -E2BIG */
int fp_symcache_get(struct fp_symcache *c, const char *path, const struct fp_file_id *want,
                    struct fp_symtab **ret);

/*
 * Loads off the caller's thread. A file a process maps may be slow to read
 * (a table of millions of symbols, a hung network mount): the cache reads
 * files on FP_SYMLOAD_THREADS loader threads. A load holds its device from
 * other loads for its first FP_SYMLOAD_STALL_MS and for as long as its
 * thread waits (on the device) rather than computes: a stuck device holds
 * one loader and the others go on, and a costly table on the root disk
 * does not hold up the files beside it.
 *
 * A load is asked for a process's owner (uid): loads of one owner other
 * than root run one at a time, so a user's costly files hold at most one
 * loader and never keep the others' files waiting.
 *
 * fp_symcache_start() asks for the table of the file want names (NULL: any)
 * through paths, tried in order (fp_symcache_get's rules for each), and
 * waits up to wait_ms (-1: until done) when a loader is free for it: 0 and
 * *ret (a reference) when done by then, else -EINPROGRESS and *ret_load,
 * which the caller polls (fp_symcache_poll(): -EINPROGRESS while running,
 * then 0 and *ret, or the error, and the load is gone) or cancels. -EBUSY
 * when FP_SYMLOAD_MAX_QUEUED loads are outstanding: ask again later.
 * The debug directory must be set before the first load, and every load
 * collected or cancelled before the cache is freed.
 */
#define FP_SYMLOAD_THREADS    2
#define FP_SYMLOAD_MAX_PATHS  3
#define FP_SYMLOAD_MAX_QUEUED 4096
#define FP_SYMLOAD_STOP_MS    1000 /* fp_symcache_free waits this long for the loaders */
#define FP_SYMLOAD_STALL_MS   100
struct fp_symload;
int fp_symcache_start(struct fp_symcache *c, const char *const *paths, size_t n_paths,
                      const struct fp_file_id *want, uint32_t owner, int wait_ms,
                      struct fp_symtab **ret, struct fp_symload **ret_load);
int fp_symcache_poll(struct fp_symcache *c, struct fp_symload *load, struct fp_symtab **ret);
void fp_symcache_cancel(struct fp_symcache *c, struct fp_symload *load);
/* Milliseconds since load was asked for. */
uint64_t fp_symload_age_ms(const struct fp_symload *load);
/* Files queued or being read on the loader threads now. */
size_t fp_symcache_n_loading(struct fp_symcache *c);
/*
 * The vdso's symtab (new reference), parsed once from the agent's own vdso
 * (AT_SYSINFO_EHDR), which the kernel maps unchanged into every 64-bit
 * process. Callers pass fp_symtab_offset_to_vaddr the offset of the
 * address in the image: ip - start of the process's [vdso] mapping (its
 * pgoff is 0, so this is the usual ip - start + pgoff). Offsets past the
 * image's PT_LOAD still translate through the first PT_LOAD.
 */
int fp_symcache_get_vdso(struct fp_symcache *c, struct fp_symtab **ret);
/*
 * The kernel's symtab from /proc/kallsyms (new reference); -EACCES when
 * addresses are hidden (kptr_restrict, or not privileged). Loaded once and
 * kept; a failure is not remembered, so callers should not retry per
 * sample. Callers pass fp_symtab_offset_to_vaddr the absolute kernel
 * address (it is the identity), and lookups take absolute addresses.
 */
int fp_symcache_get_kernel(struct fp_symcache *c, struct fp_symtab **ret);
/*
 * Number of symtabs built from ELF objects so far (files, their debug
 * files counting as part of them, and the vdso; not kallsyms), that is the
 * cache misses, for tests and status.
 */
size_t fp_symcache_n_loaded(const struct fp_symcache *c);
/* Of those, the object files whose names came from source (debugfile.h). */
size_t fp_symcache_n_by_source(const struct fp_symcache *c, enum fp_sym_source source);
/*
 * Of those, the files inspector `which` found its runtime in (is_runtime());
 * *ret_refused: those refused as such (fp_symcache_count_refusal()).
 */
size_t fp_symcache_n_runtime(const struct fp_symcache *c, size_t which, size_t *ret_refused);
/* Counts a file refused by inspector `which` (once a file: fp_symtab_refusal_said()). */
void fp_symcache_count_refusal(struct fp_symcache *c, size_t which);
/*
 * The cache keeps at most max files' tables (default FP_SYMCACHE_MAX_FILES)
 * besides those a mapping still holds: past it, adding one forgets every
 * table no mapping holds, so the files processes once mapped cannot grow
 * it without bound. Tables in use are never dropped.
 */
#define FP_SYMCACHE_MAX_FILES 1024
void fp_symcache_set_max_files(struct fp_symcache *c, size_t max);
/* Files whose tables the cache holds now. */
size_t fp_symcache_n_files(const struct fp_symcache *c);
/*
 * The tables of files only a user's own processes could have chosen (not
 * root's files that only root may write) are charged to the process's
 * owner (fp_symcache_start()'s owner, other than root): past
 * FP_SYMCACHE_USER_BYTES of them, the unheld ones are forgotten, and a
 * table that still does not fit is not kept (-EDQUOT, logged).
 */
#define FP_SYMCACHE_USER_BYTES (512u << 20)
void fp_symcache_set_user_bytes(struct fp_symcache *c, size_t bytes); /* for tests */
/* Bytes of tables charged to owner now. */
size_t fp_symcache_charged(struct fp_symcache *c, uint32_t owner);
/* The memory t holds, in bytes. */
size_t fp_symtab_bytes(const struct fp_symtab *t);
/* Whether anyone but its holder holds t too. */
bool fp_symtab_shared(const struct fp_symtab *t);

struct fp_symtab *fp_symtab_ref(struct fp_symtab *t);
void fp_symtab_unref(struct fp_symtab *t);

struct fp_cfi;
/*
 * The object's unwind table (cfi.h), compiled once when the symtab was
 * loaded, or NULL when it carries no call-frame information.
 */
const struct fp_cfi *fp_symtab_cfi(const struct fp_symtab *t);
/* Lower-case hex build ID, "" when the object has none. */
const char *fp_symtab_build_id(const struct fp_symtab *t);
/* Where t's names came from: its .symtab, a debug file, MiniDebugInfo, or only .dynsym. */
enum fp_sym_source fp_symtab_source(const struct fp_symtab *t);
/*
 * What language runtimes read in a process's file when its table is made
 * (runtimes/): once a file, shared by every process that maps it, under
 * any name. Each runtime that is recognised by its files has an inspector
 * in fp_sym_inspectors[] (NULL-terminated, at most FP_SYM_INSPECTORS),
 * which runtimes/runtimes.c defines: this floor calls it without knowing
 * which runtime it is.
 */
#define FP_SYM_INSPECTORS 8
struct fp_sym_inspector {
        const char *name;  /* the runtime's, as logs say it */
        size_t facts_size; /* what inspect() fills in */
        void (*inspect)(Elf *elf, void *facts);
        bool (*is_runtime)(const void *facts); /* the file holds the runtime itself */
        /* Frees what a process's state (maps.h: fp_maps_runtime_state()) holds, or NULL. */
        void (*free_state)(void *state);
};
extern const struct fp_sym_inspector *const fp_sym_inspectors[];
/* The slot of in in fp_sym_inspectors[], FP_SYM_INSPECTORS when it has none. */
size_t fp_sym_inspector_slot(const struct fp_sym_inspector *in);
/* What inspector `which` read in t's file, NULL when t is not a process's file. */
const void *fp_symtab_facts(const struct fp_symtab *t, size_t which);
/* Whether inspector `which`'s refusal of t's file was said already; marks it said. */
bool fp_symtab_refusal_said(struct fp_symtab *t, size_t which);
size_t fp_symtab_n_symbols(const struct fp_symtab *t);
/*
 * Symbol i (0 <= i < fp_symtab_n_symbols, in address order, one name per
 * address), or NULL past the end; *ret_start (when non-NULL) gets its start.
 */
const char *fp_symtab_symbol(const struct fp_symtab *t, size_t i, uint64_t *ret_start);

/*
 * The calls a Go compiler inlined at vaddr (gopclntab.h), innermost first,
 * into names (at most max): the callee that runs there, the function it
 * was inlined into, and so on out to (not including) the function
 * fp_symtab_lookup names. Returns how many; 0 where nothing was inlined.
 */
size_t fp_symtab_inlined(const struct fp_symtab *t, uint64_t vaddr, const char **names, size_t max);
/* The object's ranges of inlined code (for tests and status). */
size_t fp_symtab_n_inlined(const struct fp_symtab *t);

/*
 * Reads a kallsyms-format file ("ffffffff81000000 T _stext", optionally
 * followed by "\t[module]") into a new symtab of its text symbols (t, T,
 * w, W), named "name" or "name [module]"; each extends to the next symbol
 * (at most 1 MiB; the last one 4 KiB). Offsets are addresses. -EACCES when
 * every address is 0, -ENODATA when there is no line, -errno from fopen.
 * fp_symcache_get_kernel uses it on /proc/kallsyms; tests use it on files.
 */
int fp_symtab_from_kallsyms(const char *path, struct fp_symtab **ret);

/*
 * Turns a file offset (address - map start + map pgoff) into an ELF
 * virtual address using the PT_LOAD segment containing it; -ENOENT when no
 * segment does. For the kernel and the vdso, offsets are virtual addresses
 * relative to the image base as documented on each getter.
 */
int fp_symtab_offset_to_vaddr(const struct fp_symtab *t, uint64_t file_offset, uint64_t *ret_vaddr);

/*
 * Name of the function containing vaddr, or NULL. A symbol with size 0
 * covers up to the next symbol; an address past the last symbol's end or
 * before the first symbol resolves to NULL. *ret_start (when non-NULL) gets
 * the symbol's start address.
 */
const char *fp_symtab_lookup(const struct fp_symtab *t, uint64_t vaddr, uint64_t *ret_start);
