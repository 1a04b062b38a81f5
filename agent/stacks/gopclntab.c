/* SPDX-License-Identifier: MIT */
/*
 * Go function names from .gopclntab; see gopclntab.h.
 */
#include "gopclntab.h"
#include "elfread.h"

#include <elf.h>
#include <stdbool.h>
#include <string.h>

#define MAGIC_116 0xfffffffau
#define MAGIC_118 0xfffffff0u
#define MAGIC_120 0xfffffff1u

struct pcln {
        const uint8_t *p;
        size_t n;
        unsigned ptr; /* 4 or 8 */
};

/* The little-endian word of w bytes at off, or false past the end. */
static bool word(const struct pcln *t, uint64_t off, unsigned w, uint64_t *ret)
{
        if (off > t->n || t->n - off < w)
                return false;
        uint64_t v = 0;
        for (unsigned i = 0; i < w; i++)
                v |= (uint64_t)t->p[off + i] << (8 * i);
        *ret = v;
        return true;
}

int fp_gopclntab_collect(Elf *elf, fp_gopcln_fn fn, void *userdata)
{
        GElf_Shdr sh;
        Elf_Data *d = fp_elf_section(elf, ".gopclntab", &sh);
        struct pcln t;
        uint64_t magic, nfunc, text = 0, nameoff, tabboff, v;
        int named = 0;

        if (!d || !d->d_buf || d->d_size < 16)
                return 0;
        t = (struct pcln){d->d_buf, d->d_size, ((const uint8_t *)d->d_buf)[7]};
        (void)word(&t, 0, 4, &magic);
        if ((magic != MAGIC_116 && magic != MAGIC_118 && magic != MAGIC_120) ||
            (t.ptr != 4 && t.ptr != 8))
                return 0;
        bool new_layout = magic != MAGIC_116; /* 1.18+: textStart, 32-bit functab */
        uint64_t h = 8, w = t.ptr;
        if (!word(&t, h, t.ptr, &nfunc) || (new_layout && !word(&t, h + 2 * w, t.ptr, &text)) ||
            !word(&t, h + (new_layout ? 3 : 2) * w, t.ptr, &nameoff) ||
            !word(&t, h + (new_layout ? 7 : 6) * w, t.ptr, &tabboff))
                return 0;
        if (nfunc == 0 || nfunc > FP_GOPCLN_MAX_FUNCS || nameoff >= t.n || tabboff >= t.n)
                return 0;
        unsigned ew = new_layout ? 4 : t.ptr; /* a functab field */
        for (uint64_t i = 0; i < nfunc; i++) {
                uint64_t entry, funcoff, next, fentry;
                uint64_t at = tabboff + i * 2 * ew;
                if (!word(&t, at, ew, &entry) || !word(&t, at + ew, ew, &funcoff) ||
                    !word(&t, at + 2 * ew, ew, &next))
                        break;
                /* The _func: its entry again (a check), then nameOff. */
                if (!word(&t, tabboff + funcoff, ew, &fentry) || fentry != entry ||
                    !word(&t, tabboff + funcoff + ew, 4, &v))
                        continue;
                int32_t name_off = (int32_t)(uint32_t)v;
                if (name_off < 0 || nameoff + (uint64_t)name_off >= t.n || next <= entry)
                        continue;
                const char *name = (const char *)t.p + nameoff + (uint64_t)name_off;
                size_t len = strnlen(name, t.n - nameoff - (uint64_t)name_off);
                if (len == 0)
                        continue;
                if (len > FP_GOPCLN_MAX_NAME)
                        len = FP_GOPCLN_MAX_NAME;
                int r = fn(userdata, text + entry, next - entry, name, len);
                if (r < 0)
                        return r;
                named++;
        }
        return named;
}
