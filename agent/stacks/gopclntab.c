/* SPDX-License-Identifier: MIT */
/*
 * Go function names and inlined frames from .gopclntab; see gopclntab.h.
 */
#include "gopclntab.h"
#include "elfread.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC_116 0xfffffffau
#define MAGIC_118 0xfffffff0u
#define MAGIC_120 0xfffffff1u

#define PCDATA_INLTREEINDEX 2 /* _PCDATA_InlTreeIndex */
#define FUNCDATA_INLTREE    3 /* _FUNCDATA_InlTree */
#define NO_FUNCDATA         0xffffffffu
#define MAX_RUNS            (1u << 16) /* value runs read of one function's table */
#define MD_TEXT             22         /* moduledata's words: text */
#define MD_GOFUNC_118       38         /* gofunc, Go 1.18-1.19 */
#define MD_GOFUNC_120       40         /* gofunc, Go 1.20 on (covctrs, ecovctrs before it) */

struct pcln {
        const uint8_t *p;
        size_t n;
        unsigned ptr; /* 4 or 8 */
};

/* The header's facts (see gopclntab.h), every offset relative to the section. */
struct table {
        struct pcln t;
        uint32_t magic;
        bool new_layout;  /* 1.18+: textStart, 32-bit functab */
        unsigned quantum; /* the minimum instruction size: pc deltas are in these */
        unsigned ew;      /* a functab field's width */
        uint64_t vaddr;   /* of the section */
        uint64_t nfunc, text, nameoff, pctab, tabboff;
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

/* Reads elf's table header into h; false when elf has none or one not understood. */
static bool open_table(Elf *elf, struct table *h)
{
        GElf_Shdr sh;
        uint64_t magic;
        /* A PIE's table is writable, relocated data: the section is named for that. */
        Elf_Data *d = fp_elf_section(elf, ".gopclntab", &sh);

        if (!d)
                d = fp_elf_section(elf, ".data.rel.ro.gopclntab", &sh);
        if (!d || !d->d_buf || d->d_size < 16)
                return false;
        *h = (struct table){.t = {d->d_buf, d->d_size, ((const uint8_t *)d->d_buf)[7]},
                            .quantum = ((const uint8_t *)d->d_buf)[6],
                            .vaddr = sh.sh_addr};
        (void)word(&h->t, 0, 4, &magic);
        h->magic = (uint32_t)magic;
        if ((magic != MAGIC_116 && magic != MAGIC_118 && magic != MAGIC_120) ||
            (h->t.ptr != 4 && h->t.ptr != 8) || h->quantum == 0)
                return false;
        h->new_layout = magic != MAGIC_116;
        h->ew = h->new_layout ? 4 : h->t.ptr;
        uint64_t b = 8, w = h->t.ptr, x = h->new_layout ? 1 : 0;
        if (!word(&h->t, b, h->t.ptr, &h->nfunc) ||
            (h->new_layout && !word(&h->t, b + 2 * w, h->t.ptr, &h->text)) ||
            !word(&h->t, b + (2 + x) * w, h->t.ptr, &h->nameoff) ||
            !word(&h->t, b + (5 + x) * w, h->t.ptr, &h->pctab) ||
            !word(&h->t, b + (6 + x) * w, h->t.ptr, &h->tabboff))
                return false;
        return h->nfunc > 0 && h->nfunc <= FP_GOPCLN_MAX_FUNCS && h->nameoff < h->t.n &&
               h->pctab < h->t.n && h->tabboff < h->t.n;
}

/*
 * Function i's entry (relative to text), its _func's offset in the
 * section, and the next function's entry (its end): 1, or 0 when the
 * entry does not hold together, -1 past the table.
 */
static int func_at(const struct table *h, uint64_t i, uint64_t *entry, uint64_t *func,
                   uint64_t *next)
{
        uint64_t at = h->tabboff + i * 2 * h->ew, off, fentry;

        if (!word(&h->t, at, h->ew, entry) || !word(&h->t, at + h->ew, h->ew, &off) ||
            !word(&h->t, at + 2 * h->ew, h->ew, next))
                return -1;
        *func = h->tabboff + off;
        /* The _func begins with its entry again: a check. */
        return word(&h->t, *func, h->ew, &fentry) && fentry == *entry && *next > *entry;
}

/* The name at name_off in funcnametab (NUL-terminated, cut at FP_GOPCLN_MAX_NAME). */
static bool name_at(const struct table *h, uint64_t name_off, const char **ret, size_t *ret_len)
{
        if (name_off >= h->t.n - h->nameoff)
                return false;
        const char *name = (const char *)h->t.p + h->nameoff + name_off;
        size_t len = strnlen(name, h->t.n - h->nameoff - name_off);
        if (len == 0)
                return false;
        *ret = name;
        *ret_len = len > FP_GOPCLN_MAX_NAME ? FP_GOPCLN_MAX_NAME : len;
        return true;
}

int fp_gopclntab_collect(Elf *elf, fp_gopcln_fn fn, void *userdata)
{
        struct table h;
        int named = 0;

        if (!open_table(elf, &h))
                return 0;
        for (uint64_t i = 0; i < h.nfunc; i++) {
                uint64_t entry, func, next, v;
                const char *name;
                size_t len;
                int ok = func_at(&h, i, &entry, &func, &next);
                if (ok < 0)
                        break;
                if (ok == 0)
                        continue;
                int32_t name_off = word(&h.t, func + h.ew, 4, &v) ? (int32_t)(uint32_t)v : -1;
                if (name_off < 0 || !name_at(&h, (uint64_t)name_off, &name, &len))
                        continue;
                int r = fn(userdata, h.text + entry, next - entry, name, len);
                if (r < 0)
                        return r;
                named++;
        }
        return named;
}

/* ---- inlined frames (Go 1.18 on) ---- */

/* One run of a pc-value table: [start, end) has value val. */
struct run {
        uint64_t start, end;
        int32_t val;
};

/* Reads a varint (at most 32 bits) at *off; false past the end. */
static bool uvarint(const struct pcln *t, uint64_t *off, uint32_t *ret)
{
        uint32_t v = 0;

        for (unsigned shift = 0; shift < 35; shift += 7) {
                if (*off >= t->n)
                        return false;
                uint8_t b = t->p[(*off)++];
                v |= (uint32_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

/*
 * The runs of the pc-value table at pctab + off over [entry, end), as the
 * runtime's pcvalue() reads it: the value starts at -1, each step adds a
 * zig-zag delta to it and a count of quanta to the pc, and a zero value
 * delta after the first step ends the table. At most max runs.
 */
static size_t pc_runs(const struct table *h, uint64_t off, uint64_t entry, uint64_t end,
                      struct run *out, size_t max)
{
        uint64_t p = h->pctab + off, pc = entry;
        uint32_t val = (uint32_t)-1, vd, pd;
        size_t n = 0;

        for (bool first = true; n < max && pc < end; first = false) {
                if (p >= h->t.n || (h->t.p[p] == 0 && !first))
                        break;
                if (!uvarint(&h->t, &p, &vd) || !uvarint(&h->t, &p, &pd))
                        break;
                val += (uint32_t)(-(vd & 1u)) ^ (vd >> 1);
                uint64_t next = pc + (uint64_t)pd * h->quantum;
                if (next > end)
                        next = end;
                if (next > pc)
                        out[n++] = (struct run){pc, next, (int32_t)val};
                pc = next;
        }
        return n;
}

/* The value at pc among runs (sorted), -1 outside them. */
static int32_t value_at(const struct run *runs, size_t n, uint64_t pc)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (pc < runs[mid].start)
                        hi = mid;
                else if (pc >= runs[mid].end)
                        lo = mid + 1;
                else
                        return runs[mid].val;
        }
        return -1;
}

/* An allocated section's bytes and where they are loaded. */
struct section {
        const uint8_t *p;
        uint64_t addr, size;
};

/* The allocated section holding vaddr; false when none (or it has no bytes in the file). */
static bool section_of(Elf *elf, uint64_t vaddr, struct section *ret)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                    !(sh.sh_flags & SHF_ALLOC) || vaddr < sh.sh_addr ||
                    vaddr - sh.sh_addr >= sh.sh_size)
                        continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf || d->d_size != sh.sh_size)
                        return false;
                *ret = (struct section){d->d_buf, sh.sh_addr, sh.sh_size};
                return true;
        }
        return false;
}

/*
 * moduledata.gofunc, the base of the functions' funcdata: moduledata is
 * the runtime's record of the module, in its writable data, and begins
 * with the address of the table's header; it is taken when its funcnametab
 * and text agree with the header's too.
 */
static bool find_gofunc(Elf *elf, const struct table *h, uint64_t *ret)
{
        unsigned w = h->t.ptr, gofunc = h->magic == MAGIC_120 ? MD_GOFUNC_120 : MD_GOFUNC_118;
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                    (sh.sh_flags & (SHF_ALLOC | SHF_WRITE)) != (SHF_ALLOC | SHF_WRITE))
                        continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf)
                        continue;
                struct pcln s = {d->d_buf, d->d_size, w};
                for (uint64_t off = 0; off + (uint64_t)(gofunc + 1) * w <= s.n; off += w) {
                        uint64_t v, names, text;
                        if (!word(&s, off, w, &v) || v != h->vaddr)
                                continue;
                        if (word(&s, off + w, w, &names) && names == h->vaddr + h->nameoff &&
                            word(&s, off + MD_TEXT * w, w, &text) && text == h->text &&
                            word(&s, off + (uint64_t)gofunc * w, w, ret))
                                return true;
                }
        }
        return false;
}

/* One inlinedCall of the tree at index ix: its callee's name offset and parentPc. */
static bool inlined_call(const struct table *h, const struct section *tree, uint64_t at, int32_t ix,
                         uint64_t *name_off, uint64_t *parent_pc)
{
        /* 1.18-1.19: parent, funcID, pad, file, line, func_, parentPc (20 bytes); 1.20 on:
         * funcID, pad[3], nameOff, parentPc, startLine (16). */
        bool v120 = h->magic == MAGIC_120;
        uint64_t size = v120 ? 16 : 20, off = at + (uint64_t)ix * size;
        struct pcln s = {tree->p, tree->size, h->t.ptr};

        return ix >= 0 && word(&s, off + (v120 ? 4 : 12), 4, name_off) &&
               word(&s, off + (v120 ? 8 : 16), 4, parent_pc);
}

/*
 * The inlined ranges of one function (entry to end, its _func at func):
 * each run of its inline-tree index, with the chain the tree gives.
 */
static int function_inlines(const struct table *h, const struct section *gf, uint64_t gofunc,
                            uint64_t entry, uint64_t end, uint64_t func, struct run *runs,
                            fp_gopcln_inl_fn fn, void *userdata)
{
        bool v120 = h->magic == MAGIC_120;
        uint64_t npcdata, nfuncdata, pcoff, fdoff;
        uint64_t fixed = v120 ? 44 : 40; /* the _func's fixed part */
        const char *names[FP_GOPCLN_MAX_INLINE];
        size_t lens[FP_GOPCLN_MAX_INLINE];
        int n_ranges = 0;

        if (!word(&h->t, func + 28, 4, &npcdata) || !word(&h->t, func + fixed - 1, 1, &nfuncdata) ||
            npcdata <= PCDATA_INLTREEINDEX || nfuncdata <= FUNCDATA_INLTREE ||
            !word(&h->t, func + fixed + PCDATA_INLTREEINDEX * 4, 4, &pcoff) || pcoff == 0 ||
            !word(&h->t, func + fixed + npcdata * 4 + FUNCDATA_INLTREE * 4, 4, &fdoff) ||
            fdoff == NO_FUNCDATA)
                return 0;
        uint64_t tree = gofunc + fdoff;
        if (tree < gf->addr || tree - gf->addr >= gf->size)
                return 0;
        uint64_t at = tree - gf->addr;
        size_t n = pc_runs(h, pcoff, entry, end, runs, MAX_RUNS);
        for (size_t i = 0; i < n; i++) {
                unsigned depth = 0;
                for (int32_t ix = runs[i].val; ix >= 0 && depth < FP_GOPCLN_MAX_INLINE;) {
                        uint64_t name_off, parent_pc;
                        if (!inlined_call(h, gf, at, ix, &name_off, &parent_pc) ||
                            !name_at(h, name_off, &names[depth], &lens[depth]))
                                break;
                        depth++;
                        /* The call site's index: a parent is always added to the tree first. */
                        int32_t parent = value_at(runs, n, entry + parent_pc);
                        ix = parent < ix ? parent : -1;
                }
                if (depth == 0)
                        continue;
                int r = fn(userdata, h->text + runs[i].start, runs[i].end - runs[i].start, names,
                           lens, depth);
                if (r < 0)
                        return r;
                n_ranges++;
        }
        return n_ranges;
}

int fp_gopclntab_inlined(Elf *elf, fp_gopcln_inl_fn fn, void *userdata)
{
        struct table h;
        struct section gf;
        uint64_t gofunc;
        int total = 0;

        if (!open_table(elf, &h) || !h.new_layout || !find_gofunc(elf, &h, &gofunc) ||
            !section_of(elf, gofunc, &gf))
                return 0;
        struct run *runs = malloc(MAX_RUNS * sizeof(*runs));
        if (!runs)
                return -ENOMEM;
        for (uint64_t i = 0; i < h.nfunc && total < FP_GOPCLN_MAX_RANGES; i++) {
                uint64_t entry, func, next;
                int ok = func_at(&h, i, &entry, &func, &next);
                if (ok < 0)
                        break;
                if (ok == 0)
                        continue;
                int r = function_inlines(&h, &gf, gofunc, entry, next, func, runs, fn, userdata);
                if (r < 0) {
                        free(runs);
                        return r;
                }
                total += r;
        }
        free(runs);
        return total;
}
