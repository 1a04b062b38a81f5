/* SPDX-License-Identifier: MIT */
/*
 * The executable mappings of one process, as /proc/PID/maps and MMAP2
 * records tell them.
 *
 * Every mapping ever seen is kept, in an append-only array, so that a
 * stack resolved against a mapping stays valid after the library is
 * unloaded or the process has exited; mappings are referred to by their
 * 1-based index in that array (0: none). A separate sorted index holds
 * the mappings live now, for address lookups. Whenever a new mapping
 * displaces (overlaps) a live one, the epoch advances: raw addresses seen
 * before and after mean different code, so callers key caches by epoch.
 *
 * Each mapping loads its ELF symbol table lazily, once, through the shared
 * symbol cache, while the file is still there to be read: the file the
 * process mapped and no other. The path is the process's to change (a
 * FIFO, a symlink to a file its user may not read), so a file is read
 * only when its device and inode are the mapping's: through the
 * process's root, then the host's, then /proc/PID/map_files. Files on a
 * FUSE mount are not read at all: a user-space file system could make the
 * agent's loop wait for it forever.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp_symcache;
struct fp_symtab;

enum fp_mapping_kind {
        FP_MAPPING_FILE,
        FP_MAPPING_VDSO,
        FP_MAPPING_ANON, /* JIT code, [heap], ... : no symbols */
        FP_MAPPING_KERNEL,
};

struct fp_mapping {
        uint64_t start, end, pgoff;
        enum fp_mapping_kind kind;
        char *path;                 /* as the process sees it; "[vdso]", "[kernel.kallsyms]", ... */
        uint64_t dev, ino;          /* the mapped file's device and inode; 0 0 when unknown */
        struct fp_symtab *symtab;   /* NULL until loaded, or when it could not be */
        bool symtab_tried;          /* loaded, or given up on */
        struct fp_symload *symload; /* being read on a loader thread (symbols.h) */
};

struct fp_maps;

/* Mappings a process's history keeps at most (fp_maps_add(): -ENOSPC past it). */
#define FP_MAPS_MAX          65536
#define FP_MAPS_LOAD_WAIT_MS 100 /* a mapping's first use waits this long for its file */

struct fp_maps *fp_maps_new(pid_t pid, struct fp_symcache *cache);
void fp_maps_free(struct fp_maps *m);

/*
 * Re-reads /proc/PID/maps, adding its executable mappings to the live set
 * (each displacing the live ones it overlaps).
 */
int fp_maps_load_proc(struct fp_maps *m);

/*
 * After an exec: no mapping of the old program is live any more (they stay
 * known, for the frames already sampled), and /proc/PID/maps's are.
 */
int fp_maps_exec(struct fp_maps *m);
/*
 * Adds src's live mappings to dst (a child at fork has its parent's
 * address space). 0 or -errno (dst then holds part of them).
 */
int fp_maps_copy_live(struct fp_maps *dst, const struct fp_maps *src);
/* Adds one executable mapping (from an MMAP2 record); dev and ino 0 when unknown. */
int fp_maps_add(struct fp_maps *m, uint64_t start, uint64_t len, uint64_t pgoff, uint64_t dev,
                uint64_t ino, const char *path);

unsigned fp_maps_epoch(const struct fp_maps *m);
/* 1-based index of the live mapping holding addr, 0 if none. Kernel addresses map to the kernel. */
uint32_t fp_maps_find(struct fp_maps *m, uint64_t addr);
/* The mapping with 1-based index idx, or NULL. */
struct fp_mapping *fp_maps_get(const struct fp_maps *m, uint32_t idx);
size_t fp_maps_count(const struct fp_maps *m);

/*
 * Function name of addr in mapping idx, loading its symbols on first use;
 * NULL when unknown. *ret_offset gets the file offset (or kernel address)
 * used for the lookup, so callers can print "binary+0xoffset".
 */
const char *fp_maps_symbolize(struct fp_maps *m, uint32_t idx, uint64_t addr, uint64_t *ret_offset);
/*
 * The calls inlined at addr in mapping idx, innermost first, into names
 * (at most max): fp_symtab_inlined() of its symbols, once they are
 * loaded. 0 where none (or not known).
 */
size_t fp_maps_inlined(struct fp_maps *m, uint32_t idx, uint64_t addr, const char **names,
                       size_t max);

/*
 * The symtab of mapping idx (loaded on first use), or NULL when it has none
 * or its file is still being read (FP_MAPS_LOAD_WAIT_MS at most is spent
 * waiting for it; later calls find it once read).
 */
struct fp_symtab *fp_maps_symtab(struct fp_maps *m, uint32_t idx);
/* The live mappings, in address order: i from 0 below fp_maps_n_live(). */
size_t fp_maps_n_live(const struct fp_maps *m);
const struct fp_mapping *fp_maps_live_at(const struct fp_maps *m, size_t i);
/*
 * Reads the symbols of the live file mappings whose file name (its last
 * component) holds part now, not at their first sample: a runtime found
 * by its files (fp_symtab_facts()) is then known from a process's first
 * sample on.
 */
void fp_maps_read_files_named(struct fp_maps *m, const char *part);
/* The symbol cache m reads its files through. */
struct fp_symcache *fp_maps_symcache(const struct fp_maps *m);
/* The process m is of. */
pid_t fp_maps_pid(const struct fp_maps *m);
/*
 * What runtime `which` (the slot of its inspector, symbols.h) keeps of this
 * process: size bytes, zeroed at the first call, owned by m and freed with
 * it (the same size at every call; the inspector's free_state() first, if
 * it has one). NULL when out of memory.
 */
void *fp_maps_runtime_state(struct fp_maps *m, size_t which, size_t size);
/* A live file mapping whose file is named name (its last component), or NULL. */
const struct fp_mapping *fp_maps_live_mapping(const struct fp_maps *m, const char *name);
/* The path of such a mapping, or NULL. */
const char *fp_maps_live_file(const struct fp_maps *m, const char *name);
