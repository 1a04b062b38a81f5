/* SPDX-License-Identifier: MIT */
/*
 * Reading ELF files as hostile input: opening one (without blocking on a
 * FIFO, a regular file only, an ELF of a known class), its build ID, a
 * section by name, its function symbols. Used by the agent's symbol
 * tables (symbols.c), their cache (symcache.c) and its search for
 * separate debug files (debugfile.c), and by the collector's reading of
 * the debug files debuginfod servers send (collector/names/dsyms.c).
 */
#include "elfread.h"
#include "util.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

void fp_elf_hex(const unsigned char *p, size_t n, char *out)
{
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[p[i] >> 4];
                out[2 * i + 1] = digits[p[i] & 15];
        }
        out[2 * n] = '\0';
}

/* Finds an NT_GNU_BUILD_ID note in d; writes its hex to out (FP_ELF_BUILD_ID_HEX bytes). */
static bool note_build_id(Elf_Data *d, char *out)
{
        size_t off = 0, next, name_off, desc_off;
        GElf_Nhdr nh;

        if (!d || !d->d_buf)
                return false;
        while ((next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
                const char *p = d->d_buf;

                if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                    memcmp(p + name_off, "GNU", 4) == 0 && nh.n_descsz > 0 &&
                    nh.n_descsz <= FP_ELF_BUILD_ID_MAX) {
                        fp_elf_hex((const unsigned char *)p + desc_off, nh.n_descsz, out);
                        return true;
                }
                off = next;
        }
        return false;
}

/* The build ID of elf from its PT_NOTE segments, else its SHT_NOTE sections; "" if none. */
void fp_elf_build_id(Elf *elf, char *out)
{
        Elf_Scn *scn = NULL;
        size_t n = 0;

        out[0] = '\0';
        if (elf_getphdrnum(elf, &n) == 0) {
                for (size_t i = 0; i < n; i++) {
                        GElf_Phdr ph;
                        Elf_Data *d;

                        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
                            ph.p_filesz == 0 || ph.p_offset > INT64_MAX)
                                continue;
                        d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
                                                 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
                        if (note_build_id(d, out))
                                return;
                }
        }
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
                        continue;
                if (note_build_id(elf_getdata(scn, NULL), out))
                        return;
        }
}

/* Whether elf has a non-empty .symtab (more than the exported .dynsym). */
bool fp_elf_has_symtab(Elf *elf)
{
        Elf_Scn *scn = NULL;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_size > 0)
                        return true;
        }
        return false;
}

/* Opens path as an ELF file for reading. On success the caller owns *ret_fd and *ret_elf. */
int fp_elf_open(const char *path, int *ret_fd, Elf **ret_elf, struct stat *ret_st)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        Elf *elf;

        fd =
            open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY); /* a FIFO must not block us */
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -ENOEXEC;
        elf = elf_begin(fd, ELF_C_READ, NULL);
        if (!elf)
                return -ENOEXEC;
        if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) == ELFCLASSNONE) {
                elf_end(elf);
                return -ENOEXEC;
        }
        *ret_fd = fd;
        fd = -1;
        *ret_elf = elf;
        if (ret_st)
                *ret_st = st;
        return 0;
}

Elf_Data *fp_elf_section(Elf *elf, const char *name, GElf_Shdr *ret_sh)
{
        Elf_Scn *scn = NULL;
        size_t shstrndx;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return NULL;
        while ((scn = elf_nextscn(elf, scn))) {
                const char *n;
                if (gelf_getshdr(scn, ret_sh) && ret_sh->sh_type == SHT_PROGBITS &&
                    (n = elf_strptr(elf, shstrndx, ret_sh->sh_name)) && strcmp(n, name) == 0)
                        return elf_getdata(scn, NULL);
        }
        return NULL;
}

int fp_elf_functions(Elf *elf, bool symtab_only, fp_elf_function_fn fn, void *arg,
                     bool *ret_has_symtab)
{
        size_t symsz = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
        Elf_Scn *scn = NULL;
        int r;

        if (ret_has_symtab)
                *ret_has_symtab = false;
        while (symsz && (scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh) ||
                    (sh.sh_type != SHT_SYMTAB && (symtab_only || sh.sh_type != SHT_DYNSYM)))
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d)
                        continue;
                if (sh.sh_type == SHT_SYMTAB && d->d_size > symsz && ret_has_symtab)
                        *ret_has_symtab = true;
                for (size_t i = 1; i < d->d_size / symsz; i++) {
                        const char *name;
                        unsigned type;
                        GElf_Sym s;

                        if (!gelf_getsym(d, (int)i, &s))
                                break;
                        type = GELF_ST_TYPE(s.st_info);
                        if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
                            s.st_shndx == SHN_UNDEF || s.st_value == 0)
                                continue;
                        name = elf_strptr(elf, sh.sh_link, s.st_name);
                        if (name && *name && (r = fn(arg, &s, name)) < 0)
                                return r;
                }
        }
        return 0;
}
