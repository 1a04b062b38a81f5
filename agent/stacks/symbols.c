/* SPDX-License-Identifier: MIT */
/*
 * ELF symbol tables: loading and lookup (see symbols.h).
 *
 * Loading a symtab: function symbols (STT_FUNC, STT_GNU_IFUNC) of .symtab
 * and .dynsym, plus those of /usr/lib/debug/.build-id/xx/rest.debug when
 * the object has no .symtab (or its debug file's, its MiniDebugInfo's, a
 * Go binary's .gopclntab: debugfile.h, gopclntab.h), and the PLT's entries
 * as `func@plt` (plt.h),
 * go into a builder; names are copied, because
 * the ELF is closed once loaded. The builder sorts by address, keeps one
 * name per address (sized before unsized, global before weak before local,
 * fewer leading underscores, shorter, then alphabetical, so the choice is
 * deterministic), gives unsized symbols the room up to the next symbol
 * (bounded by their section), and then flattens the possibly nested or
 * overlapping symbols into ranges:
 *
 *   ranges[i] = { start, sym }  covers [ranges[i].start, ranges[i + 1].start)
 *
 * sorted by strictly increasing start, where sym is the index of the
 * innermost symbol covering that stretch, or NO_SYM for a gap. The last
 * range is always a gap, so an address past the last symbol's end resolves
 * to nothing. Lookup is one binary search over the ranges; a symtab never
 * changes after loading, so any number of threads may look up at once.
 *
 * The cache that shares symtabs by build ID lives in symcache.c.
 */
#include "util.h"
#include "symbols.h"
#include "symbols-internal.h"
#include "cfi.h"
#include "plt.h"
#include "debugfile.h"
#include "elfread.h"
#include "gopclntab.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_SYM             UINT32_MAX
#define LAST_IMPLIED_SIZE  4096u      /* room given to a last symbol of unknown size */
#define KERNEL_MAX_IMPLIED (1u << 20) /* kernel symbols never span more than this */
#define VDSO_MAX_SIZE      (1u << 20) /* sanity bound on the vdso image */

struct sym {
        uint64_t start;
        uint32_t name; /* offset into names */
};

struct range {
        uint64_t start;
        uint32_t sym; /* index into syms, or NO_SYM */
};

struct segment {
        uint64_t offset, filesz, memsz, vaddr;
};

/* Code a Go compiler inlined (gopclntab.h): [start, start + size) runs chain. */
struct inl_range {
        uint64_t start;
        uint32_t size;
        uint32_t chain; /* into inl_chains: a count, then that many offsets into inl_names */
};

struct fp_symtab {
        unsigned long refs;
        bool identity;             /* kernel: "offsets" are already addresses */
        bool first_load_fallback;  /* vdso: offsets past every segment use the first PT_LOAD */
        bool full;                 /* has .symtab (or a debug file's): not just .dynsym */
        enum fp_sym_source source; /* where its names came from */
        char build_id[KEY_MAX];
        struct sym *syms;
        size_t n_syms;
        struct range *ranges;
        size_t n_ranges;
        char *names;
        size_t names_len;
        struct segment *segs;
        size_t n_segs;
        struct fp_cfi *cfi;    /* unwind table (cfi.h), NULL when the object has no CFI */
        struct inl_range *inl; /* sorted, disjoint */
        size_t n_inl;
        uint32_t *inl_chains;
        size_t n_inl_chains;
        char *inl_names; /* each name once, NUL-terminated */
        size_t inl_names_len;
        /* A process's file: what each runtime's inspector read in it (symbols.h) */
        void *facts[FP_SYM_INSPECTORS];
        bool refusal_said[FP_SYM_INSPECTORS]; /* a refusal (under some name) was logged */
};

/* ---- builder: symbols as collected, before sorting and flattening ---- */

struct raw_sym {
        uint64_t start;
        uint64_t end;     /* exclusive; 0 while the size is unknown */
        uint64_t sec_end; /* end of the containing section, UINT64_MAX if unknown */
        size_t name;      /* offset into the builder's arena */
        unsigned rank;    /* binding: 2 global, 1 weak, 0 local */
};

struct builder {
        struct raw_sym *syms;
        size_t n, cap;
        char *arena;
        size_t len, arena_cap;
};

static void builder_done(struct builder *b)
{
        free(b->syms);
        free(b->arena);
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * Appends one symbol; the name is name[0..len) followed, when mod is
 * non-NULL, by " [mod]". size 0 means unknown. 0 or -ENOMEM.
 */
static int builder_add(struct builder *b, uint64_t start, uint64_t size, uint64_t sec_end,
                       unsigned rank, const char *name, size_t len, const char *mod, size_t mod_len)
{
        size_t need = len + 1 + (mod ? mod_len + 3 : 0);
        struct raw_sym *s;
        int r;

        if (need < len || b->len > SIZE_MAX - need)
                return -ENOMEM;
        if (b->n >= FP_SYM_MAX_SYMBOLS)
                return -E2BIG;
        if (b->n == b->cap) {
                r = fp_grow((void **)&b->syms, &b->cap, b->n + 1, sizeof(*b->syms));
                if (r < 0)
                        return r;
        }
        if (b->len + need > b->arena_cap) {
                r = fp_grow((void **)&b->arena, &b->arena_cap, b->len + need, 1);
                if (r < 0)
                        return r;
        }
        s = &b->syms[b->n++];
        s->start = start;
        s->end = size ? add_sat(start, size) : 0;
        s->sec_end = sec_end;
        s->name = b->len;
        s->rank = rank;
        memcpy(b->arena + b->len, name, len);
        b->len += len;
        if (mod) {
                b->arena[b->len++] = ' ';
                b->arena[b->len++] = '[';
                memcpy(b->arena + b->len, mod, mod_len);
                b->len += mod_len;
                b->arena[b->len++] = ']';
        }
        b->arena[b->len++] = '\0';
        return 0;
}

static int cmp_start(const void *x, const void *y)
{
        const struct raw_sym *a = x, *b = y;

        return a->start < b->start ? -1 : a->start > b->start;
}

static size_t leading_underscores(const char *s)
{
        size_t n = 0;

        while (s[n] == '_')
                n++;
        return n;
}

/* Whether a should name an address rather than b (both start there). */
static bool better(const struct builder *b, const struct raw_sym *x, const struct raw_sym *y)
{
        const char *nx = b->arena + x->name, *ny = b->arena + y->name;
        size_t ux, uy, lx, ly;

        if ((x->end != 0) != (y->end != 0))
                return x->end != 0;
        if (x->rank != y->rank)
                return x->rank > y->rank;
        ux = leading_underscores(nx);
        uy = leading_underscores(ny);
        if (ux != uy)
                return ux < uy;
        lx = strlen(nx);
        ly = strlen(ny);
        if (lx != ly)
                return lx < ly;
        return strcmp(nx, ny) < 0;
}

static void emit(struct range *ranges, size_t *n, uint64_t start, uint32_t sym)
{
        ranges[(*n)++] = (struct range){.start = start, .sym = sym};
}

/*
 * Turns the collected symbols into t's syms, names and ranges (see the
 * file comment). An unknown size extends to the next symbol, bounded by
 * the symbol's section and by mid_cap; the last such symbol gets its
 * section's end or last_cap. The builder's arrays are reordered. 0 or
 * -ENOMEM (-E2BIG if the names exceed 4 GiB).
 */
static int builder_finish(struct builder *b, struct fp_symtab *t, uint64_t mid_cap,
                          uint64_t last_cap)
{
        _cleanup_free_ uint32_t *stack = NULL;
        struct range *ranges = NULL;
        struct sym *syms = NULL;
        char *names = NULL;
        size_t n = 0, nr = 0, sp = 0, total = 0;

        if (b->n)
                qsort(b->syms, b->n, sizeof(*b->syms), cmp_start);

        /* One entry per address; the group is read before its slot is overwritten. */
        for (size_t i = 0, j; i < b->n; i = j) {
                struct raw_sym best = b->syms[i];
                uint64_t end = best.end, sec_end = best.sec_end;

                for (j = i + 1; j < b->n && b->syms[j].start == best.start; j++) {
                        if (better(b, &b->syms[j], &best))
                                best = b->syms[j];
                        if (b->syms[j].end > end)
                                end = b->syms[j].end;
                        if (b->syms[j].sec_end < sec_end)
                                sec_end = b->syms[j].sec_end;
                }
                best.end = end;
                best.sec_end = sec_end;
                b->syms[n++] = best;
        }
        if (n >= NO_SYM)
                return -E2BIG;

        for (size_t i = 0; i < n; i++) {
                struct raw_sym *s = &b->syms[i];
                bool in_section = s->sec_end != UINT64_MAX && s->sec_end > s->start;
                uint64_t e;

                if (s->end)
                        continue;
                if (i + 1 < n) {
                        e = b->syms[i + 1].start;
                        if (e - s->start > mid_cap)
                                e = s->start + mid_cap;
                        if (in_section && s->sec_end < e)
                                e = s->sec_end;
                } else {
                        e = in_section ? s->sec_end : add_sat(s->start, last_cap);
                }
                if (e <= s->start) /* only when start == UINT64_MAX */
                        e = s->start;
                s->end = e;
        }

        for (size_t i = 0; i < n; i++) {
                total += strlen(b->arena + b->syms[i].name) + 1;
                if (total > UINT32_MAX)
                        return -E2BIG;
        }
        syms = calloc(n ? n : 1, sizeof(*syms));
        names = malloc(total ? total : 1);
        ranges = calloc(2 * n + 1, sizeof(*ranges));
        stack = calloc(n ? n : 1, sizeof(*stack));
        if (!syms || !names || !ranges || !stack) {
                free(syms);
                free(names);
                free(ranges);
                return -ENOMEM;
        }
        total = 0;
        for (size_t i = 0; i < n; i++) {
                const char *s = b->arena + b->syms[i].name;
                size_t l = strlen(s) + 1;

                memcpy(names + total, s, l);
                syms[i] = (struct sym){.start = b->syms[i].start, .name = (uint32_t)total};
                total += l;
        }

        /*
         * Sweep: the stack holds the symbols open at the current address,
         * innermost on top, their ends strictly decreasing from the bottom.
         * Whenever the top one ends before the next symbol starts, the one
         * beneath it (or a gap) takes over from that end.
         */
        for (size_t i = 0; i < n; i++) {
                const struct raw_sym *s = &b->syms[i];

                while (sp && b->syms[stack[sp - 1]].end <= s->start) {
                        uint64_t e = b->syms[stack[--sp]].end;

                        if (e < s->start)
                                emit(ranges, &nr, e, sp ? stack[sp - 1] : NO_SYM);
                }
                emit(ranges, &nr, s->start, (uint32_t)i);
                /* Symbols ending within s are hidden from here on; s wins an overlap. */
                while (sp && b->syms[stack[sp - 1]].end <= s->end)
                        sp--;
                stack[sp++] = (uint32_t)i;
        }
        while (sp) {
                uint64_t e = b->syms[stack[--sp]].end;

                emit(ranges, &nr, e, sp ? stack[sp - 1] : NO_SYM);
        }
        if (nr && nr < 2 * n + 1) { /* typically about n + 1: give the rest back */
                struct range *shrunk = realloc(ranges, nr * sizeof(*ranges));

                if (shrunk)
                        ranges = shrunk;
        }

        t->syms = syms;
        t->n_syms = n;
        t->names = names;
        t->names_len = total;
        t->ranges = ranges;
        t->n_ranges = nr;
        return 0;
}

static unsigned elf_rank(unsigned char bind)
{
        switch (bind) {
        case STB_GLOBAL:
        case STB_GNU_UNIQUE:
                return 2;
        case STB_WEAK:
                return 1;
        default:
                return 0;
        }
}

/* What collect_symbols() hands each symbol to. */
struct collecting {
        struct builder *b;
        const uint64_t *sec_end; /* [section index]: its end, UINT64_MAX unknown */
        size_t shnum;
        bool arm;
};

static int collect_one(void *arg, const GElf_Sym *s, const char *name)
{
        const struct collecting *c = arg;
        uint64_t value = c->arm ? s->st_value & ~(uint64_t)1 : s->st_value; /* Thumb bit */

        return builder_add(c->b, value, s->st_size,
                           s->st_shndx < c->shnum && s->st_shndx < SHN_LORESERVE
                               ? c->sec_end[s->st_shndx]
                               : UINT64_MAX,
                           elf_rank(GELF_ST_BIND(s->st_info)), name, strlen(name), NULL, 0);
}

/*
 * Adds the function symbols of elf's .symtab and .dynsym sections to b.
 * *ret_has_symtab tells whether a (non-empty) .symtab exists. Malformed
 * tables are skipped. 0 or -ENOMEM.
 */
static int collect_symbols(Elf *elf, struct builder *b, bool *ret_has_symtab)
{
        _cleanup_free_ uint64_t *sec_end = NULL;
        size_t shnum = 0;
        GElf_Ehdr eh = {0};

        if (!gelf_getehdr(elf, &eh) || elf_getshdrnum(elf, &shnum) < 0)
                shnum = 0;
        if (shnum) {
                sec_end = calloc(shnum, sizeof(*sec_end));
                if (!sec_end)
                        return -ENOMEM;
                for (size_t i = 0; i < shnum; i++) {
                        Elf_Scn *s = elf_getscn(elf, i);
                        GElf_Shdr sh;

                        sec_end[i] = UINT64_MAX;
                        if (s && gelf_getshdr(s, &sh) && (sh.sh_flags & SHF_ALLOC))
                                sec_end[i] = add_sat(sh.sh_addr, sh.sh_size);
                }
        }
        struct collecting c = {
            .b = b, .sec_end = sec_end, .shnum = shnum, .arm = eh.e_machine == EM_ARM};
        return fp_elf_functions(elf, false, collect_one, &c, ret_has_symtab);
}

/* A PLT entry (plt.h) or a Go function (gopclntab.h) into the builder: sized, local. */
static int add_plt_entry(void *userdata, uint64_t start, uint64_t size, const char *name,
                         size_t name_len)
{
        return builder_add(userdata, start, size, UINT64_MAX, 0, name, name_len, NULL, 0);
}

/* Copies elf's PT_LOAD segments into t. 0 or -ENOMEM. */
static int collect_segments(Elf *elf, struct fp_symtab *t)
{
        size_t n = 0, k = 0;

        if (elf_getphdrnum(elf, &n) < 0 || n == 0)
                return 0;
        t->segs = calloc(n, sizeof(*t->segs));
        if (!t->segs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                GElf_Phdr ph;

                if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
                        continue;
                t->segs[k++] = (struct segment){
                    .offset = ph.p_offset,
                    .filesz = ph.p_filesz,
                    .memsz = ph.p_memsz,
                    .vaddr = ph.p_vaddr,
                };
        }
        t->n_segs = k;
        return 0;
}

/*
 * Compiles the object's unwind table once, with its symbols: from its own
 * .eh_frame/.debug_frame, or else from its separate debug file's
 * .debug_frame (dbg, or NULL). An object without CFI (or with CFI too
 * damaged to use) simply has none; only -ENOMEM is an error.
 */
static int load_cfi(Elf *elf, Elf *dbg, struct fp_symtab *t)
{
        int r = fp_cfi_compile(elf, &t->cfi);

        if (r == -ENOMEM)
                return r;
        if (r >= 0 || !dbg)
                return 0;
        r = fp_cfi_compile(dbg, &t->cfi);
        return r == -ENOMEM ? r : 0;
}

/*
 * The names a stripped object lacks (it has no .symtab): from its separate
 * debug file (kept open in *dbg for its CFI), else its MiniDebugInfo
 * (debugfile.h). Sets t->source; only -ENOMEM is an error.
 */
static int collect_elsewhere(Elf *elf, const char *build_id, const struct fp_sym_origin *origin,
                             const char *debug_dir, struct builder *b, struct fp_symtab *t,
                             struct fp_debug_elf *dbg)
{
        struct fp_debug_elf mini = {.fd = -1};
        enum fp_sym_source src;
        bool has = false;
        int r;

        r = fp_debug_find(origin->path, elf, build_id, debug_dir, origin->owner, dbg, &src);
        if (r > 0 && (r = collect_symbols(dbg->elf, b, &has)) >= 0 && has)
                t->source = src;
        if (r < 0 || t->source != FP_SYM_SOURCE_DYNSYM)
                return r < 0 ? r : 0;
        r = fp_debug_minidebuginfo(elf, &mini);
        if (r > 0 && (r = collect_symbols(mini.elf, b, &has)) >= 0 && has)
                t->source = FP_SYM_SOURCE_MINIDEBUG;
        fp_debug_close(&mini);
        return r < 0 ? r : 0;
}

/* Inlined ranges as they are read: each callee's name interned once. */
struct inl_loader {
        struct fp_symtab *t;
        size_t cap_inl, cap_chains, cap_names;
        uint32_t *slots; /* open addressing: a name's offset + 1, 0 empty */
        size_t n_slots, n_used;
};

/* The offset of name[0..len) in t->inl_names, added when new; -ENOMEM. */
static int64_t inl_intern(struct inl_loader *l, const char *name, size_t len)
{
        struct fp_symtab *t = l->t;

        if ((l->n_used + 1) * 2 > l->n_slots) {
                size_t n = l->n_slots ? 2 * l->n_slots : 1024;
                uint32_t *slots = calloc(n, sizeof(*slots));
                if (!slots)
                        return -ENOMEM;
                for (size_t i = 0; i < l->n_slots; i++) {
                        if (!l->slots[i])
                                continue;
                        const char *s = t->inl_names + l->slots[i] - 1;
                        size_t j = fp_fnv1a(FP_FNV1A_SEED, s, strlen(s)) & (n - 1);
                        while (slots[j])
                                j = (j + 1) & (n - 1);
                        slots[j] = l->slots[i];
                }
                free(l->slots);
                l->slots = slots;
                l->n_slots = n;
        }
        size_t j = fp_fnv1a(FP_FNV1A_SEED, name, len) & (l->n_slots - 1);
        for (; l->slots[j]; j = (j + 1) & (l->n_slots - 1)) {
                const char *s = t->inl_names + l->slots[j] - 1;
                if (strncmp(s, name, len) == 0 && s[len] == 0)
                        return l->slots[j] - 1;
        }
        if (t->inl_names_len + len + 1 >= UINT32_MAX ||
            fp_grow(&t->inl_names, &l->cap_names, t->inl_names_len + len + 1, 1) < 0)
                return -ENOMEM;
        size_t off = t->inl_names_len;
        memcpy(t->inl_names + off, name, len);
        t->inl_names[off + len] = 0;
        t->inl_names_len += len + 1;
        l->slots[j] = (uint32_t)off + 1;
        l->n_used++;
        return (int64_t)off;
}

static int add_inlined(void *userdata, uint64_t start, uint64_t size, const char *const *names,
                       const size_t *lens, unsigned n)
{
        struct inl_loader *l = userdata;
        struct fp_symtab *t = l->t;

        if (size > UINT32_MAX ||
            (t->n_inl && start < t->inl[t->n_inl - 1].start + t->inl[t->n_inl - 1].size))
                return 0; /* out of order or overlapping: not a table the compiler wrote */
        if (t->n_inl_chains + n + 1 >= UINT32_MAX ||
            fp_grow(&t->inl, &l->cap_inl, t->n_inl + 1, sizeof(*t->inl)) < 0 ||
            fp_grow(&t->inl_chains, &l->cap_chains, t->n_inl_chains + n + 1,
                    sizeof(*t->inl_chains)) < 0)
                return -ENOMEM;
        uint32_t chain = (uint32_t)t->n_inl_chains;
        t->inl_chains[chain] = n;
        for (unsigned i = 0; i < n; i++) {
                int64_t off = inl_intern(l, names[i], lens[i]);
                if (off < 0)
                        return (int)off;
                t->inl_chains[chain + 1 + i] = (uint32_t)off;
        }
        t->n_inl_chains += n + 1;
        t->inl[t->n_inl++] = (struct inl_range){start, (uint32_t)size, chain};
        return 0;
}

/* The code elf's Go compiler inlined (gopclntab.h) into t; only -ENOMEM is an error. */
static int load_inlined(Elf *elf, struct fp_symtab *t)
{
        struct inl_loader l = {.t = t};
        int r = fp_gopclntab_inlined(elf, add_inlined, &l);

        free(l.slots);
        return r == -ENOMEM ? r : 0;
}

static struct fp_symtab *symtab_alloc(void)
{
        struct fp_symtab *t = calloc(1, sizeof(*t));

        if (t)
                t->refs = 1;
        return t;
}

/* What each runtime's inspector reads in elf, into t (only -ENOMEM is an error). */
static int inspect_runtimes(Elf *elf, struct fp_symtab *t)
{
        for (size_t i = 0; i < FP_SYM_INSPECTORS && fp_sym_inspectors[i]; i++) {
                const struct fp_sym_inspector *in = fp_sym_inspectors[i];
                t->facts[i] = calloc(1, in->facts_size);
                if (!t->facts[i])
                        return -ENOMEM;
                in->inspect(elf, t->facts[i]);
        }
        return 0;
}

/*
 * Builds a symtab from an open ELF whose build ID (possibly "") was already
 * read. The caller keeps elf; *ret is a new reference.
 */
int fp_sym_load_elf(Elf *elf, const char *build_id, const struct fp_sym_origin *origin,
                    const char *debug_dir, bool vdso, struct fp_symtab **ret)
{
        _cleanup_(builder_done) struct builder b = {0};
        struct fp_debug_elf dbg = {.fd = -1};
        struct fp_symtab *t;
        bool has_symtab = false;
        int r;

        t = symtab_alloc();
        if (!t)
                return -ENOMEM;
        snprintf(t->build_id, sizeof(t->build_id), "%s", build_id);
        t->first_load_fallback = vdso;
        r = collect_symbols(elf, &b, &has_symtab);
        if (r >= 0)
                r = fp_plt_collect(elf, add_plt_entry, &b);
        t->source = has_symtab ? FP_SYM_SOURCE_SYMTAB : FP_SYM_SOURCE_DYNSYM;
        if (r >= 0 && !has_symtab && origin)
                r = collect_elsewhere(elf, build_id, origin, debug_dir, &b, t, &dbg);
        /* A stripped Go binary: the runtime's own table of its functions. */
        if (r >= 0 && t->source == FP_SYM_SOURCE_DYNSYM) {
                r = fp_gopclntab_collect(elf, add_plt_entry, &b);
                if (r > 0)
                        t->source = FP_SYM_SOURCE_PCLNTAB;
        }
        t->full = t->source != FP_SYM_SOURCE_DYNSYM;
        if (r >= 0)
                r = collect_segments(elf, t);
        if (r >= 0)
                r = builder_finish(&b, t, UINT64_MAX, LAST_IMPLIED_SIZE);
        if (r >= 0)
                r = load_cfi(elf, dbg.elf, t);
        if (r >= 0 && !vdso)
                r = load_inlined(elf, t);
        /* A file of a process (not the vdso): what it says of each runtime. */
        if (r >= 0 && origin)
                r = inspect_runtimes(elf, t);
        fp_debug_close(&dbg);
        if (r < 0) {
                fp_symtab_unref(t);
                return r;
        }
        *ret = t;
        return 0;
}

/* ---- symtab API ---- */

struct fp_symtab *fp_symtab_ref(struct fp_symtab *t)
{
        if (t)
                __atomic_add_fetch(&t->refs, 1, __ATOMIC_RELAXED);
        return t;
}

bool fp_symtab_shared(const struct fp_symtab *t)
{
        return __atomic_load_n(&t->refs, __ATOMIC_ACQUIRE) > 1;
}

void fp_symtab_unref(struct fp_symtab *t)
{
        if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return;
        free(t->syms);
        free(t->ranges);
        free(t->names);
        free(t->segs);
        fp_cfi_free(t->cfi);
        free(t->inl);
        free(t->inl_chains);
        free(t->inl_names);
        for (size_t i = 0; i < FP_SYM_INSPECTORS; i++)
                free(t->facts[i]);
        free(t);
}

size_t fp_symtab_bytes(const struct fp_symtab *t)
{
        if (!t)
                return 0;
        return sizeof(*t) + t->n_syms * sizeof(*t->syms) + t->n_ranges * sizeof(*t->ranges) +
               t->names_len + t->n_segs * sizeof(*t->segs) + fp_cfi_bytes(t->cfi) +
               t->n_inl * sizeof(*t->inl) + t->n_inl_chains * sizeof(*t->inl_chains) +
               t->inl_names_len;
}

const struct fp_cfi *fp_symtab_cfi(const struct fp_symtab *t)
{
        return t ? t->cfi : NULL;
}

const char *fp_symtab_build_id(const struct fp_symtab *t)
{
        return t ? t->build_id : "";
}

size_t fp_symtab_n_symbols(const struct fp_symtab *t)
{
        return t ? t->n_syms : 0;
}

int fp_symtab_offset_to_vaddr(const struct fp_symtab *t, uint64_t file_offset, uint64_t *ret_vaddr)
{
        if (!t || !ret_vaddr)
                return -EINVAL;
        if (t->identity) {
                *ret_vaddr = file_offset;
                return 0;
        }
        /* File contents first; the memsz tail (.bss) only when nothing else matches. */
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < t->n_segs; i++) {
                        const struct segment *s = &t->segs[i];
                        uint64_t len =
                            pass ? (s->memsz > s->filesz ? s->memsz : s->filesz) : s->filesz;

                        if (file_offset >= s->offset && file_offset - s->offset < len) {
                                *ret_vaddr = file_offset - s->offset + s->vaddr;
                                return 0;
                        }
                }
        }
        if (t->first_load_fallback && t->n_segs && file_offset >= t->segs[0].offset) {
                *ret_vaddr = file_offset - t->segs[0].offset + t->segs[0].vaddr;
                return 0;
        }
        return -ENOENT;
}

/*
 * The index of the first of n sorted entries (of size bytes each, each
 * beginning with its uint64_t start) that starts after vaddr.
 */
_Static_assert(offsetof(struct range, start) == 0 && offsetof(struct inl_range, start) == 0,
               "first_after() reads each entry's start at its beginning");
static size_t first_after(const void *entries, size_t n, size_t size, uint64_t vaddr)
{
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                uint64_t start;
                memcpy(&start, (const char *)entries + mid * size, sizeof(start));
                if (start <= vaddr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

const char *fp_symtab_lookup(const struct fp_symtab *t, uint64_t vaddr, uint64_t *ret_start)
{
        const struct range *r;
        size_t lo;

        if (!t)
                return NULL;
        lo = first_after(t->ranges, t->n_ranges, sizeof(*t->ranges), vaddr);
        if (lo == 0)
                return NULL;
        r = &t->ranges[lo - 1];
        if (r->sym == NO_SYM)
                return NULL;
        if (ret_start)
                *ret_start = t->syms[r->sym].start;
        return t->names + t->syms[r->sym].name;
}

size_t fp_symtab_inlined(const struct fp_symtab *t, uint64_t vaddr, const char **names, size_t max)
{
        size_t lo = t ? first_after(t->inl, t->n_inl, sizeof(*t->inl), vaddr) : 0;

        if (lo == 0 || vaddr - t->inl[lo - 1].start >= t->inl[lo - 1].size)
                return 0;
        const uint32_t *chain = &t->inl_chains[t->inl[lo - 1].chain];
        size_t n = chain[0] < max ? chain[0] : max;
        for (size_t i = 0; i < n; i++)
                names[i] = t->inl_names + chain[1 + i];
        return n;
}

size_t fp_symtab_n_inlined(const struct fp_symtab *t)
{
        return t ? t->n_inl : 0;
}

const char *fp_symtab_symbol(const struct fp_symtab *t, size_t i, uint64_t *ret_start)
{
        if (!t || i >= t->n_syms)
                return NULL;
        if (ret_start)
                *ret_start = t->syms[i].start;
        return t->names + t->syms[i].name;
}

/* ---- kernel ---- */

/* The kernel's build ID from /sys/kernel/notes (raw 4-byte aligned notes); "" if unknown. */
static void kernel_build_id(char *out)
{
        _cleanup_close_ int fd = -1;
        unsigned char buf[4096];
        size_t off = 0;
        ssize_t n;

        out[0] = '\0';
        fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        n = read(fd, buf, sizeof(buf));
        while (n > 0 && off + 12 <= (size_t)n) {
                uint32_t namesz, descsz, type;
                size_t name_len, desc_len;

                memcpy(&namesz, buf + off, 4);
                memcpy(&descsz, buf + off + 4, 4);
                memcpy(&type, buf + off + 8, 4);
                name_len = ((size_t)namesz + 3) & ~(size_t)3;
                desc_len = ((size_t)descsz + 3) & ~(size_t)3;
                if (name_len > (size_t)n || desc_len > (size_t)n ||
                    off + 12 + name_len + desc_len > (size_t)n)
                        return;
                if (type == NT_GNU_BUILD_ID && namesz == 4 &&
                    memcmp(buf + off + 12, "GNU", 4) == 0 && descsz > 0 &&
                    descsz <= FP_ELF_BUILD_ID_MAX) {
                        fp_elf_hex(buf + off + 12 + name_len, descsz, out);
                        return;
                }
                off += 12 + name_len + desc_len;
        }
}

static unsigned kallsyms_rank(char type)
{
        switch (type) {
        case 'T':
                return 2;
        case 'W':
                return 1;
        default:
                return 0;
        }
}

int fp_symtab_from_kallsyms(const char *path, struct fp_symtab **ret)
{
        _cleanup_(builder_done) struct builder b = {0};
        _cleanup_(fclosep) FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        struct fp_symtab *t;
        size_t line_cap = 0, n_lines = 0;
        bool any_address = false;
        ssize_t len;
        int r;

        if (!path || !ret)
                return -EINVAL;
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while ((len = getline(&line, &line_cap, f)) > 0) {
                char *p, *name, *mod = NULL, *e;
                size_t name_len, mod_len = 0;
                uint64_t addr;
                char type;

                if (line[len - 1] == '\n')
                        line[--len] = '\0';
                errno = 0;
                addr = strtoull(line, &p, 16);
                if (errno || p == line || p[0] != ' ' || !p[1] || p[2] != ' ')
                        continue; /* not "ADDR T NAME[\t[MOD]]" */
                n_lines++;
                any_address |= addr != 0;
                type = p[1];
                if (type != 't' && type != 'T' && type != 'w' && type != 'W')
                        continue;
                name = p + 3;
                name_len = strcspn(name, "\t ");
                if (!name_len)
                        continue;
                e = name + name_len;
                e += strspn(e, "\t ");
                if (*e == '[') {
                        mod = e + 1;
                        mod_len = strcspn(mod, "]");
                        if (!mod_len)
                                mod = NULL;
                }
                r = builder_add(&b, addr, 0, UINT64_MAX, kallsyms_rank(type), name, name_len, mod,
                                mod_len);
                if (r < 0)
                        return r;
        }
        if (ferror(f))
                return -EIO;
        if (n_lines == 0)
                return -ENODATA;
        if (!any_address)
                return -EACCES;

        t = symtab_alloc();
        if (!t)
                return -ENOMEM;
        t->identity = true;
        kernel_build_id(t->build_id);
        r = builder_finish(&b, t, KERNEL_MAX_IMPLIED, LAST_IMPLIED_SIZE);
        if (r < 0) {
                fp_symtab_unref(t);
                return r;
        }
        *ret = t;
        return 0;
}

/* ---- vdso ---- */

/* Size of the ELF image at base as its headers describe it; 0 when implausible. */
static size_t vdso_image_size(const unsigned char *base)
{
        const ElfW(Ehdr) *eh = (const void *)base;
        const ElfW(Phdr) * ph;
        const ElfW(Shdr) * sh;
        uint64_t size = sizeof(*eh);

        if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phoff >= VDSO_MAX_SIZE ||
            eh->e_shoff >= VDSO_MAX_SIZE || eh->e_phnum > 1024 || eh->e_shnum > 1024)
                return 0;
        if (eh->e_phnum && eh->e_phentsize != sizeof(*ph))
                return 0;
        if (eh->e_shnum && eh->e_shentsize != sizeof(*sh))
                return 0;
        ph = (const void *)(base + eh->e_phoff);
        sh = (const void *)(base + eh->e_shoff);
        if (eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(*ph) > size)
                size = eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(*ph);
        if (eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh) > size)
                size = eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh);
        for (unsigned i = 0; i < eh->e_phnum; i++)
                if (ph[i].p_offset + (uint64_t)ph[i].p_filesz > size)
                        size = ph[i].p_offset + (uint64_t)ph[i].p_filesz;
        for (unsigned i = 0; i < eh->e_shnum; i++)
                if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + (uint64_t)sh[i].sh_size > size)
                        size = sh[i].sh_offset + (uint64_t)sh[i].sh_size;
        return size > VDSO_MAX_SIZE ? 0 : (size_t)size;
}

/* Loads the vdso mapped into this process: a private copy, parsed, then freed. */
int fp_sym_load_vdso(struct fp_symtab **ret)
{
        _cleanup_free_ char *copy = NULL;
        _cleanup_(elf_endp) Elf *elf = NULL;
        unsigned long base = getauxval(AT_SYSINFO_EHDR);
        char bid[KEY_MAX];
        size_t size;

        if (!base)
                return -ENOENT;
        size = vdso_image_size((const unsigned char *)base);
        if (!size)
                return -ENOEXEC;
        copy = malloc(size);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, (const void *)base, size);
        elf = elf_memory(copy, size);
        if (!elf || elf_kind(elf) != ELF_K_ELF)
                return -ENOEXEC;
        fp_elf_build_id(elf, bid);
        return fp_sym_load_elf(elf, bid, NULL, NULL, true, ret);
}

size_t fp_sym_inspector_slot(const struct fp_sym_inspector *in)
{
        for (size_t i = 0; i < FP_SYM_INSPECTORS && fp_sym_inspectors[i]; i++)
                if (fp_sym_inspectors[i] == in)
                        return i;
        return FP_SYM_INSPECTORS;
}

const void *fp_symtab_facts(const struct fp_symtab *t, size_t which)
{
        return t && which < FP_SYM_INSPECTORS ? t->facts[which] : NULL;
}

bool fp_symtab_refusal_said(struct fp_symtab *t, size_t which)
{
        return which >= FP_SYM_INSPECTORS ||
               __atomic_exchange_n(&t->refusal_said[which], true, __ATOMIC_ACQ_REL);
}

enum fp_sym_source fp_symtab_source(const struct fp_symtab *t)
{
        return t->source;
}

bool fp_sym_symtab_full(const struct fp_symtab *t)
{
        return t->full;
}
