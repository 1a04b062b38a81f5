/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for what the collector reads from debuginfod servers
 * (collector/names/dsyms.h, debuginfod.h), files an outside server
 * chose: the input is one ELF file, read as an executable's first bytes
 * (its program headers: fp_dsyms_segments) and as a debug file of its own
 * build ID (fp_dsyms_load: symbols, their names demangled, the names'
 * memory bounded by the file's size), then named at offsets around its
 * symbols. The input's first line, as a string, is also judged as a build
 * ID (fp_dbgi_build_id_ok). None may crash or read or write out of
 * bounds; a name found must be a string of the file's.
 */
#include "debuginfod.h"
#include "dsyms.h"
#include "elfread.h"

#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fp_dsyms_seg segs[FP_DSYMS_MAX_SEGS];
        char err[256], id[FP_ELF_BUILD_ID_HEX] = "", path[64];
        char line[300];
        size_t ll = 0;

        while (ll < size && ll + 1 < sizeof(line) && data[ll] != '\n') {
                line[ll] = (char)data[ll];
                ll++;
        }
        line[ll] = 0;
        if (fp_dbgi_build_id_ok(line, err, sizeof(err)) > 0 &&
            (strlen(line) % 2 || strlen(line) > 128))
                abort();

        size_t head = size < FP_DSYMS_HEAD_BYTES ? size : FP_DSYMS_HEAD_BYTES;
        uint8_t *copy = malloc(head ? head : 1); /* exact size: ASan sees a read past it */
        if (!copy)
                return 0;
        memcpy(copy, data, head);
        int n = fp_dsyms_segments(copy, head, segs, FP_DSYMS_MAX_SEGS, err, sizeof(err));
        free(copy);
        if (n > (int)FP_DSYMS_MAX_SEGS)
                abort();
        if (n < 0)
                n = 0;

        /* Its own build ID, so that the symbols are read and not refused at once. */
        elf_version(EV_CURRENT);
        char *mem = malloc(size ? size : 1);
        if (!mem)
                return 0;
        memcpy(mem, data, size);
        Elf *elf = elf_memory(mem, size);
        if (elf && elf_kind(elf) == ELF_K_ELF)
                fp_elf_build_id(elf, id);
        elf_end(elf);
        free(mem);
        if (!*id)
                snprintf(id, sizeof(id), "0123456789abcdef");

        int fd = memfd_create("fuzz-dsyms", MFD_CLOEXEC);
        if (fd < 0)
                return 0;
        if (write(fd, data, size) != (ssize_t)size) {
                close(fd);
                return 0;
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        struct fp_dsyms *d = NULL;
        if (fp_dsyms_load(path, id, segs, (size_t)n, &d, err, sizeof(err)) == 0) {
                if (fp_dsyms_bytes(d) >
                    4 * size + FP_DSYMS_NAMES_SLACK + fp_dsyms_count(d) * 64 + 65536)
                        abort();
                for (uint64_t off = 0; off < 0x3000; off += 0x11) {
                        const char *sys = NULL, *name = fp_dsyms_name(d, off, &sys);
                        if (name && strlen(name) > 65536)
                                abort();
                        if (sys)
                                (void)strlen(sys);
                }
                fp_dsyms_unref(d);
        }
        close(fd);
        return 0;
}
