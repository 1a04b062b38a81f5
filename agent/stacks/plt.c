/* SPDX-License-Identifier: MIT */
/*
 * PLT entries named by the function their GOT slot is relocated to; see
 * plt.h.
 */
#include "plt.h"
#include "util.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 256 /* longer function names are cut, as the symbol tables' are not: rare */

/*
 * A relocated GOT slot and the .dynsym index of its function; or, for an
 * R_X86_64_IRELATIVE slot (libc's calls to its own memcpy, strlen, ...),
 * sym 0 and the resolver's address, which an STT_GNU_IFUNC symbol names.
 */
struct slot {
        uint64_t got;
        uint32_t sym;
        uint64_t resolver;
};

struct plt_ctx {
        Elf *elf;
        Elf_Data *dynsym;
        size_t dynstr; /* section index of .dynsym's strings */
        struct slot *slots;
        size_t n_slots, cap_slots;
        uint32_t *lazy; /* .rela.plt's symbol indexes, in order: a lazy IBT entry's push */
        size_t n_lazy, cap_lazy;
        struct slot *ifuncs; /* {resolver address, .dynsym index, rank} */
        size_t n_ifuncs, cap_ifuncs;
};

/* By address, then by the third field (the rank among IFUNCs at one address). */
static int cmp_slot(const void *a, const void *b)
{
        const struct slot *x = a, *y = b;
        if (x->got != y->got)
                return x->got < y->got ? -1 : 1;
        return x->resolver < y->resolver ? -1 : x->resolver > y->resolver;
}

static uint32_t le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const char *section_name(Elf *elf, const GElf_Shdr *sh)
{
        size_t shstrndx;
        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return NULL;
        return elf_strptr(elf, shstrndx, sh->sh_name);
}

/* The relocations of one SHT_RELA section against .dynsym (index dynsym_idx) into x. */
static int collect_relocs(struct plt_ctx *x, Elf_Scn *scn, const GElf_Shdr *sh, size_t dynsym_idx)
{
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t relsz = gelf_fsize(x->elf, ELF_T_RELA, 1, EV_CURRENT);
        const char *name = section_name(x->elf, sh);
        bool lazy = name && strcmp(name, ".rela.plt") == 0;

        if (!d || !relsz || sh->sh_link != dynsym_idx)
                return 0;
        for (size_t i = 0; i < d->d_size / relsz && i < FP_PLT_MAX_ENTRIES; i++) {
                GElf_Rela r;
                if (!gelf_getrela(d, (int)i, &r))
                        break;
                uint32_t sym = (uint32_t)GELF_R_SYM(r.r_info), type = GELF_R_TYPE(r.r_info);
                if (lazy) {
                        if (fp_grow(&x->lazy, &x->cap_lazy, x->n_lazy + 1, sizeof(*x->lazy)) < 0)
                                return -ENOMEM;
                        x->lazy[x->n_lazy++] = type == R_X86_64_JUMP_SLOT ? sym : 0;
                }
                bool irelative = type == R_X86_64_IRELATIVE && r.r_addend > 0;
                if (!irelative &&
                    (!sym || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)))
                        continue;
                if (fp_grow(&x->slots, &x->cap_slots, x->n_slots + 1, sizeof(*x->slots)) < 0)
                        return -ENOMEM;
                x->slots[x->n_slots++] = (struct slot){r.r_offset, irelative ? 0 : sym,
                                                       irelative ? (uint64_t)r.r_addend : 0};
        }
        return 0;
}

/* The .dynsym's IFUNC symbols by resolver address, for IRELATIVE slots; globals first at an
 * address. */
static int collect_ifuncs(struct plt_ctx *x)
{
        size_t symsz = gelf_fsize(x->elf, ELF_T_SYM, 1, EV_CURRENT);
        GElf_Sym s;

        for (size_t i = 1; symsz && i < x->dynsym->d_size / symsz; i++) {
                if (!gelf_getsym(x->dynsym, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC)
                        continue;
                if (fp_grow(&x->ifuncs, &x->cap_ifuncs, x->n_ifuncs + 1, sizeof(*x->ifuncs)) < 0)
                        return -ENOMEM;
                /* memcpy (global) rather than __memcpy (local or weak): the lower rank first. */
                x->ifuncs[x->n_ifuncs++] = (struct slot){
                    s.st_value, (uint32_t)i, GELF_ST_BIND(s.st_info) == STB_GLOBAL ? 0 : 1};
        }
        if (x->n_ifuncs)
                qsort(x->ifuncs, x->n_ifuncs, sizeof(*x->ifuncs), cmp_slot);
        return 0;
}

static uint32_t ifunc_sym(const struct plt_ctx *x, uint64_t resolver)
{
        size_t lo = 0, hi = x->n_ifuncs;

        while (lo < hi) { /* the first at resolver */
                size_t mid = lo + (hi - lo) / 2;
                if (x->ifuncs[mid].got < resolver)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < x->n_ifuncs && x->ifuncs[lo].got == resolver ? x->ifuncs[lo].sym : 0;
}

static uint32_t slot_sym(const struct plt_ctx *x, uint64_t got)
{
        size_t lo = 0, hi = x->n_slots;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (x->slots[mid].got < got)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == x->n_slots || x->slots[lo].got != got)
                return 0;
        return x->slots[lo].sym ? x->slots[lo].sym : ifunc_sym(x, x->slots[lo].resolver);
}

/*
 * The .dynsym index of the function the entry at p (len bytes, at vaddr)
 * calls, or 0 when it is not an entry this module understands.
 */
static uint32_t entry_sym(const struct plt_ctx *x, const uint8_t *p, size_t len, uint64_t vaddr)
{
        size_t i = 0;

        if (len >= 4 && p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa)
                i = 4; /* endbr64 */
        if (i < len && p[i] == 0xf2)
                i++; /* bnd */
        if (i + 6 <= len && p[i] == 0xff && p[i + 1] == 0x25) {
                int32_t disp = (int32_t)le32(p + i + 2);
                return slot_sym(x, vaddr + i + 6 + (uint64_t)(int64_t)disp);
        }
        if (i + 5 <= len && p[i] == 0x68) { /* push $index: a lazy entry of an IBT .plt */
                uint32_t index = le32(p + i + 1);
                return index < x->n_lazy ? x->lazy[index] : 0;
        }
        return 0;
}

/* Names the entries of one PLT section. */
static int name_entries(struct plt_ctx *x, Elf_Scn *scn, const GElf_Shdr *sh, bool got_plt,
                        fp_plt_fn fn, void *userdata)
{
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t symsz = gelf_fsize(x->elf, ELF_T_SYM, 1, EV_CURRENT);
        uint64_t step = sh->sh_entsize == 8 || sh->sh_entsize == 16 ? sh->sh_entsize
                        : got_plt                                   ? 8
                                                                    : 16;
        char name[NAME_MAX_LEN + 5];
        size_t named = 0;

        if (!d || !d->d_buf || !symsz || d->d_size > sh->sh_size)
                return 0;
        for (uint64_t off = 0; off + step <= d->d_size && named < FP_PLT_MAX_ENTRIES; off += step) {
                uint32_t idx =
                    entry_sym(x, (const uint8_t *)d->d_buf + off, step, sh->sh_addr + off);
                GElf_Sym s;
                const char *fname;

                if (!idx || idx >= x->dynsym->d_size / symsz ||
                    !gelf_getsym(x->dynsym, (int)idx, &s) ||
                    !(fname = elf_strptr(x->elf, x->dynstr, s.st_name)) || !*fname)
                        continue;
                size_t len = strnlen(fname, NAME_MAX_LEN);
                memcpy(name, fname, len);
                memcpy(name + len, "@plt", 5);
                int r = fn(userdata, sh->sh_addr + off, step, name, len + 4);
                if (r < 0)
                        return r;
                named++;
        }
        return 0;
}

int fp_plt_collect(Elf *elf, fp_plt_fn fn, void *userdata)
{
        struct plt_ctx x = {.elf = elf};
        Elf_Scn *scn = NULL, *dynsym = NULL;
        GElf_Ehdr eh;
        GElf_Shdr sh;
        int r = 0;

        if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64)
                return 0;
        while ((scn = elf_nextscn(elf, scn)))
                if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM) {
                        dynsym = scn;
                        x.dynstr = sh.sh_link;
                        break;
                }
        if (!dynsym || !(x.dynsym = elf_getdata(dynsym, NULL)))
                return 0;
        size_t dynsym_idx = elf_ndxscn(dynsym);
        for (scn = NULL; r >= 0 && (scn = elf_nextscn(elf, scn));)
                if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_RELA)
                        r = collect_relocs(&x, scn, &sh, dynsym_idx);
        if (r >= 0 && x.n_slots)
                qsort(x.slots, x.n_slots, sizeof(*x.slots), cmp_slot);
        if (r >= 0)
                r = collect_ifuncs(&x);
        for (scn = NULL; r >= 0 && (scn = elf_nextscn(elf, scn));) {
                const char *name;
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                    !(sh.sh_flags & SHF_EXECINSTR) || !(name = section_name(elf, &sh)))
                        continue;
                if (strcmp(name, ".plt") == 0 || strcmp(name, ".plt.sec") == 0 ||
                    strcmp(name, ".plt.got") == 0)
                        r = name_entries(&x, scn, &sh, strcmp(name, ".plt.got") == 0, fn, userdata);
        }
        free(x.slots);
        free(x.lazy);
        free(x.ifuncs);
        return r;
}
