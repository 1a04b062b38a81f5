/* SPDX-License-Identifier: MIT */
/* A file's symbols and data, a process's memory, for the runtimes (rtelf.h). */
#include "rtelf.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

void fp_rt_elf_symbols(Elf *elf, void (*fn)(void *userdata, const char *name, const GElf_Sym *s),
                       void *userdata)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) ||
                    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
                        continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
                for (size_t i = 0; d && i < n; i++) {
                        GElf_Sym s;
                        const char *name;
                        /* (A thread-local one's value is its offset in its block: 0 is one.) */
                        if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
                            (!s.st_value && GELF_ST_TYPE(s.st_info) != STT_TLS))
                                continue;
                        name = elf_strptr(elf, sh.sh_link, s.st_name);
                        if (name)
                                fn(userdata, name, &s);
                }
        }
}

bool fp_rt_elf_read(Elf *elf, uint64_t vaddr, void *buf, size_t len)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
                        continue;
                if (vaddr < sh.sh_addr || vaddr + len > sh.sh_addr + sh.sh_size)
                        continue;
                if (sh.sh_type == SHT_NOBITS) {
                        memset(buf, 0, len);
                        return true;
                }
                if (sh.sh_type != SHT_PROGBITS)
                        return false;
                Elf_Data *d = elf_getdata(scn, NULL);
                uint64_t off = vaddr - sh.sh_addr;
                if (!d || !d->d_buf || off + len > d->d_size)
                        return false;
                memcpy(buf, (const char *)d->d_buf + off, len);
                return true;
        }
        return false;
}

void fp_rt_elf_relocs(Elf *elf, void (*fn)(void *userdata, const GElf_Rela *r, const char *sym),
                      void *userdata)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh, symsh;

        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
                        continue;
                Elf_Scn *symscn = elf_getscn(elf, sh.sh_link);
                Elf_Data *syms =
                    symscn && gelf_getshdr(symscn, &symsh) ? elf_getdata(symscn, NULL) : NULL;
                Elf_Data *d = elf_getdata(scn, NULL);
                size_t n = sh.sh_size / sh.sh_entsize;
                for (size_t i = 0; d && i < n; i++) {
                        GElf_Rela r;
                        GElf_Sym s;
                        const char *name = NULL;
                        size_t symi;
                        if (!gelf_getrela(d, (int)i, &r))
                                continue;
                        symi = GELF_R_SYM(r.r_info);
                        if (symi && syms && gelf_getsym(syms, (int)symi, &s))
                                name = elf_strptr(elf, symsh.sh_link, s.st_name);
                        fn(userdata, &r, name);
                }
        }
}

int fp_rt_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
        struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

        if (n == (ssize_t)len)
                return 0;
        return n < 0 && errno != EFAULT ? -errno : -EFAULT;
}

int fp_rt_peek_cstr(pid_t pid, uint64_t addr, char *buf, size_t len)
{
        size_t n = 0;

        buf[0] = 0;
        if (!addr || !len)
                return -EFAULT;
        while (n + 1 < len) {
                size_t chunk = 4096 - ((addr + n) & 4095);
                if (chunk > len - 1 - n)
                        chunk = len - 1 - n;
                if (fp_rt_peek(pid, addr + n, buf + n, chunk) < 0) {
                        buf[n] = 0;
                        return -EFAULT;
                }
                if (memchr(buf + n, 0, chunk))
                        return 0;
                n += chunk;
        }
        buf[len - 1] = 0;
        return -E2BIG;
}
