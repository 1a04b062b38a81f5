/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for what the root agent reads from files that the
 * profiled processes choose: ELF symbol tables, build IDs and program
 * headers (fp_symcache_get()), the unwind tables compiled from
 * .eh_frame and .debug_frame (fp_cfi_compile_file()), and kallsyms-format
 * text (fp_symtab_from_kallsyms()). The input is the file, written to a
 * memfd and opened by its /proc/self/fd path, as the agent opens a
 * mapping's file. Whatever it holds, nothing may crash, leak, read out of
 * bounds or loop; what loads is then queried at addresses the input names.
 */
#include "cfi.h"
#include "symbols.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t sink;

/* Addresses to look up: around the symbols, the rows, and from the input's first bytes. */
static void probe(const struct fp_symtab *t, const uint8_t *data, size_t size)
{
        size_t n = fp_symtab_n_symbols(t);
        const struct fp_cfi *cfi = fp_symtab_cfi(t);
        uint64_t start, vaddr;

        sink += strlen(fp_symtab_build_id(t));
        for (size_t i = 0; i < n && i < 4096; i++) {
                const char *name = fp_symtab_symbol(t, i, &start);
                if (!name)
                        abort(); /* i is below the count */
                sink += strlen(name);
                const char *again = fp_symtab_lookup(t, start, NULL);
                sink += again ? strlen(again) : 0;
        }
        for (size_t i = 0; i + 8 <= size && i < 256; i += 8) {
                uint64_t a;
                memcpy(&a, data + i, 8);
                const char *name = fp_symtab_lookup(t, a, &start);
                sink += name ? strlen(name) + start : 0;
                if (fp_symtab_offset_to_vaddr(t, a, &vaddr) == 0)
                        sink += vaddr;
                if (cfi) {
                        const struct fp_cfi_row *row = fp_cfi_find(cfi, a);
                        sink += row ? row->pc + (uint64_t)row->cfa_off : 0;
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fp_symcache *cache = fp_symcache_new();
        struct fp_symtab *t = NULL;
        struct fp_cfi *cfi = NULL;
        char path[64];
        int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);

        if (fd < 0 || !cache)
                abort();
        if (size && write(fd, data, size) != (ssize_t)size)
                abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        if (fp_cfi_compile_file(path, &cfi) == 0) {
                for (size_t i = 0; i < fp_cfi_n_rows(cfi); i++)
                        sink += fp_cfi_row(cfi, i)->pc;
                fp_cfi_free(cfi);
        }
        if (fp_symcache_get(cache, path, NULL, &t) == 0) {
                probe(t, data, size);
                fp_symtab_unref(t);
        }
        t = NULL;
        if (fp_symtab_from_kallsyms(path, &t) == 0) {
                probe(t, data, size);
                fp_symtab_unref(t);
        }
        fp_symcache_free(cache);
        close(fd);
        return 0;
}
