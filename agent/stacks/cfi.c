/* SPDX-License-Identifier: MIT */
/*
 * The CFI compiler; see cfi.h for the table it produces.
 *
 * Formats (DWARF 4 section 6.4 and the Linux Standard Base's .eh_frame):
 * a section is a sequence of entries, each a CIE (common information:
 * alignment factors, the return-address column, the initial instructions,
 * and in .eh_frame an augmentation that says how FDE pointers are encoded)
 * or an FDE (an address range, its CIE, and the instructions that describe
 * how the rules change across the range). Running a CIE's and then an
 * FDE's instructions over the range gives the rows this table keeps.
 *
 * Everything is read through a bounds-checked cursor: the file is
 * whatever a profiled process mapped, so a malformed entry ends the parse
 * of its section (keeping the rows before it), never the agent.
 */
#include "cfi.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* x86-64 DWARF register numbers. */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA  16

#define MAX_STATE_STACK 16

/*
 * rows sorted by pc; page[p] is the first row whose pc is at or past
 * base + p * PAGE (p <= n_pages), so a lookup binary-searches only the few
 * rows of one page of code instead of the whole table (whose 0.5 MB for
 * libc would otherwise miss the cache at every step).
 */
#define PAGE_SHIFT 12
struct fp_cfi {
        struct fp_cfi_row *rows;
        size_t n, cap;
        uint64_t base;
        uint32_t *page;
        size_t n_pages;
};

/* ---- cursor ---- */

struct cursor {
        const uint8_t *p, *end;
        uint64_t vaddr; /* address of *p when the section is loaded (for pcrel) */
        bool bad;
};

static void advance(struct cursor *c, size_t n)
{
        c->p += n;
        c->vaddr += n;
}

static uint64_t read_n(struct cursor *c, size_t n)
{
        uint64_t v = 0;
        if (c->bad || (size_t)(c->end - c->p) < n) {
                c->bad = true;
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                v |= (uint64_t)c->p[i] << (8 * i); /* x86-64: little endian */
        advance(c, n);
        return v;
}

static uint64_t read_uleb(struct cursor *c)
{
        uint64_t v = 0;
        unsigned shift = 0;
        while (!c->bad) {
                if (c->p >= c->end) {
                        c->bad = true;
                        break;
                }
                uint8_t b = *c->p;
                advance(c, 1);
                if (shift < 64)
                        v |= (uint64_t)(b & 0x7f) << shift;
                shift += 7;
                if (!(b & 0x80))
                        break;
        }
        return v;
}

static int64_t read_sleb(struct cursor *c)
{
        int64_t v = 0;
        unsigned shift = 0;
        uint8_t b = 0;
        while (!c->bad) {
                if (c->p >= c->end) {
                        c->bad = true;
                        return 0;
                }
                b = *c->p;
                advance(c, 1);
                if (shift < 64)
                        v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
                shift += 7;
                if (!(b & 0x80))
                        break;
        }
        if (shift < 64 && (b & 0x40))
                v |= -((int64_t)1 << shift);
        return v;
}

/* DW_EH_PE_* pointer encodings. */
#define PE_OMIT    0xff
#define PE_FORMAT  0x0f
#define PE_APPLY   0x70
#define PE_ABSPTR  0x00
#define PE_ULEB    0x01
#define PE_UDATA2  0x02
#define PE_UDATA4  0x03
#define PE_UDATA8  0x04
#define PE_SLEB    0x09
#define PE_SDATA2  0x0a
#define PE_SDATA4  0x0b
#define PE_SDATA8  0x0c
#define PE_PCREL   0x10
#define PE_DATAREL 0x30

/* An encoded pointer; pcrel is relative to the field's own address. */
static uint64_t read_encoded(struct cursor *c, uint8_t enc)
{
        uint64_t here = c->vaddr, v;

        if (enc == PE_OMIT)
                return 0;
        switch (enc & PE_FORMAT) {
        case PE_ABSPTR:
        case PE_UDATA8:
        case PE_SDATA8:
                v = read_n(c, 8);
                break;
        case PE_ULEB:
                v = read_uleb(c);
                break;
        case PE_SLEB:
                v = (uint64_t)read_sleb(c);
                break;
        case PE_UDATA2:
                v = read_n(c, 2);
                break;
        case PE_SDATA2:
                v = (uint64_t)(int64_t)(int16_t)read_n(c, 2);
                break;
        case PE_UDATA4:
                v = read_n(c, 4);
                break;
        case PE_SDATA4:
                v = (uint64_t)(int64_t)(int32_t)read_n(c, 4);
                break;
        default:
                c->bad = true;
                return 0;
        }
        switch (enc & PE_APPLY) {
        case 0:
                return v;
        case PE_PCREL:
                return v + here;
        default:
                /* datarel/textrel/funcrel: not used for FDE ranges on x86-64 Linux. */
                c->bad = true;
                return 0;
        }
}

/* ---- rules and rows ---- */

enum rule_kind { RULE_SAME, RULE_UNDEF, RULE_OFFSET, RULE_OTHER };

struct rule {
        uint8_t kind;
        int64_t off;
};

struct state {
        uint8_t cfa; /* FP_CFI_CFA_SP, _BP, _PLT, _UNSUPPORTED */
        int64_t cfa_off;
        uint8_t plt_threshold;
        struct rule rbp, ra;
};

struct cie {
        uint64_t code_align;
        int64_t data_align;
        uint64_t ra_reg;
        uint8_t fde_enc;
        bool has_aug_data; /* 'z' */
        const uint8_t *insns, *insns_end;
        uint64_t insns_vaddr;
        bool ok;
};

static int push_row(struct fp_cfi *t, uint64_t pc, const struct state *s)
{
        struct fp_cfi_row r = {.pc = pc, .cfa = s->cfa};

        if (s->cfa == FP_CFI_CFA_SP || s->cfa == FP_CFI_CFA_BP) {
                if (s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX)
                        r.cfa = FP_CFI_UNSUPPORTED;
                r.cfa_off = (int32_t)s->cfa_off;
        } else if (s->cfa == FP_CFI_CFA_PLT) {
                /* The threshold lives in rbp_off, which a PLT row does not use:
                 * never in flags, whose bits mean what they say for every row. */
                r.cfa_off = 8;
                r.rbp_off = s->plt_threshold;
        }
        if (s->ra.kind == RULE_UNDEF) {
                r.flags |= FP_CFI_RA_UNDEFINED;
        } else if (s->ra.kind != RULE_OFFSET || s->ra.off != -8) {
                r.cfa = FP_CFI_UNSUPPORTED;
        }
        if (r.cfa != FP_CFI_CFA_PLT && s->rbp.kind == RULE_OFFSET) {
                if (s->rbp.off >= INT16_MIN && s->rbp.off <= INT16_MAX) {
                        r.flags |= FP_CFI_RBP_SAVED;
                        r.rbp_off = (int16_t)s->rbp.off;
                } else {
                        r.cfa = FP_CFI_UNSUPPORTED;
                }
        } else if (s->rbp.kind == RULE_OTHER) {
                r.cfa = FP_CFI_UNSUPPORTED;
        }
        if (r.cfa == FP_CFI_UNSUPPORTED)
                r.cfa_off = 0, r.rbp_off = 0, r.flags &= FP_CFI_RA_UNDEFINED;
        /* Consecutive identical rules: one row. */
        if (t->n && t->rows[t->n - 1].pc <= pc) {
                const struct fp_cfi_row *l = &t->rows[t->n - 1];
                if (l->cfa == r.cfa && l->cfa_off == r.cfa_off && l->rbp_off == r.rbp_off &&
                    l->flags == r.flags)
                        return 0;
                if (l->pc == pc) {
                        t->rows[t->n - 1] = r;
                        return 0;
                }
        }
        if (fp_grow(&t->rows, &t->cap, t->n + 1, sizeof(*t->rows)) < 0)
                return -ENOMEM;
        t->rows[t->n++] = r;
        return 0;
}

/* Whether a DW_CFA_def_cfa_expression is the PLT idiom; sets the threshold. */
static bool plt_expression(const uint8_t *e, size_t n, uint8_t *ret_threshold)
{
        /* breg7 (rsp) 8; breg16 (rip) 0; lit15; and; litN; ge; lit3; shl; plus */
        if (n != 11 || e[0] != 0x77 || e[1] != 8 || e[2] != 0x80 || e[3] != 0 || e[4] != 0x3f ||
            e[5] != 0x1a || e[6] < 0x30 || e[6] > 0x4f || e[7] != 0x2a || e[8] != 0x33 ||
            e[9] != 0x24 || e[10] != 0x22)
                return false;
        *ret_threshold = (uint8_t)(e[6] - 0x30);
        return true;
}

static struct rule *rule_of(struct state *s, uint64_t reg)
{
        if (reg == REG_RBP)
                return &s->rbp;
        if (reg == REG_RA)
                return &s->ra;
        return NULL; /* other registers: the unwinder does not need them */
}

/*
 * Runs instructions [c) from loc, emitting a row whenever the location
 * advances. With emit false (a CIE's initial instructions) it only builds
 * the state. Returns 0 or -ENOMEM; a malformed program sets c->bad.
 */
static int run(struct fp_cfi *t, struct cursor *c, const struct cie *cie, struct state *s,
               const struct state *initial, uint64_t *loc, uint64_t end, bool emit)
{
        struct state stack[MAX_STATE_STACK];
        unsigned depth = 0;
        int r;

        while (!c->bad && c->p < c->end) {
                uint8_t op = (uint8_t)read_n(c, 1);
                uint8_t hi = op & 0xc0, low = op & 0x3f;
                uint64_t reg, delta = 0;
                struct rule *rl;

                if (hi == 0x40) { /* advance_loc */
                        delta = low * cie->code_align;
                } else if (hi == 0x80) { /* offset */
                        reg = low;
                        int64_t off = (int64_t)read_uleb(c) * cie->data_align;
                        if ((rl = rule_of(s, reg)))
                                *rl = (struct rule){RULE_OFFSET, off};
                        continue;
                } else if (hi == 0xc0) { /* restore */
                        if ((rl = rule_of(s, low)))
                                *rl = *rule_of((struct state *)initial, low);
                        continue;
                } else {
                        switch (op) {
                        case 0x00: /* nop */
                                continue;
                        case 0x01: /* set_loc */
                        {
                                uint64_t to = read_encoded(c, cie->fde_enc);
                                if (to < *loc) {
                                        c->bad = true;
                                        continue;
                                }
                                delta = to - *loc;
                                break;
                        }
                        case 0x02:
                                delta = read_n(c, 1) * cie->code_align;
                                break;
                        case 0x03:
                                delta = read_n(c, 2) * cie->code_align;
                                break;
                        case 0x04:
                                delta = read_n(c, 4) * cie->code_align;
                                break;
                        case 0x05: /* offset_extended */
                                reg = read_uleb(c);
                                {
                                        int64_t off = (int64_t)read_uleb(c) * cie->data_align;
                                        if ((rl = rule_of(s, reg)))
                                                *rl = (struct rule){RULE_OFFSET, off};
                                }
                                continue;
                        case 0x11: /* offset_extended_sf */
                                reg = read_uleb(c);
                                {
                                        int64_t off = read_sleb(c) * cie->data_align;
                                        if ((rl = rule_of(s, reg)))
                                                *rl = (struct rule){RULE_OFFSET, off};
                                }
                                continue;
                        case 0x2f: /* GNU_negative_offset_extended */
                                reg = read_uleb(c);
                                {
                                        int64_t off = -(int64_t)read_uleb(c) * cie->data_align;
                                        if ((rl = rule_of(s, reg)))
                                                *rl = (struct rule){RULE_OFFSET, off};
                                }
                                continue;
                        case 0x06: /* restore_extended */
                                reg = read_uleb(c);
                                if ((rl = rule_of(s, reg)))
                                        *rl = *rule_of((struct state *)initial, reg);
                                continue;
                        case 0x07: /* undefined */
                                if ((rl = rule_of(s, read_uleb(c))))
                                        *rl = (struct rule){RULE_UNDEF, 0};
                                continue;
                        case 0x08: /* same_value */
                                if ((rl = rule_of(s, read_uleb(c))))
                                        *rl = (struct rule){RULE_SAME, 0};
                                continue;
                        case 0x09: /* register */
                                reg = read_uleb(c);
                                (void)read_uleb(c);
                                if ((rl = rule_of(s, reg)))
                                        *rl = (struct rule){RULE_OTHER, 0};
                                continue;
                        case 0x0a: /* remember_state */
                                if (depth == MAX_STATE_STACK) {
                                        c->bad = true;
                                        continue;
                                }
                                stack[depth++] = *s;
                                continue;
                        case 0x0b: /* restore_state: every rule, the CFA's too (as GCC expects) */
                                if (depth == 0) {
                                        c->bad = true;
                                        continue;
                                }
                                *s = stack[--depth];
                                continue;
                        case 0x0c: /* def_cfa */
                        case 0x12: /* def_cfa_sf */
                                reg = read_uleb(c);
                                s->cfa_off = op == 0x0c ? (int64_t)read_uleb(c)
                                                        : read_sleb(c) * cie->data_align;
                                s->cfa = reg == REG_RSP   ? FP_CFI_CFA_SP
                                         : reg == REG_RBP ? FP_CFI_CFA_BP
                                                          : FP_CFI_UNSUPPORTED;
                                continue;
                        case 0x0d: /* def_cfa_register */
                                reg = read_uleb(c);
                                if (s->cfa == FP_CFI_CFA_PLT)
                                        s->cfa_off = 0;
                                s->cfa = reg == REG_RSP   ? FP_CFI_CFA_SP
                                         : reg == REG_RBP ? FP_CFI_CFA_BP
                                                          : FP_CFI_UNSUPPORTED;
                                continue;
                        case 0x0e: /* def_cfa_offset */
                                s->cfa_off = (int64_t)read_uleb(c);
                                continue;
                        case 0x13: /* def_cfa_offset_sf */
                                s->cfa_off = read_sleb(c) * cie->data_align;
                                continue;
                        case 0x0f: /* def_cfa_expression */
                        {
                                uint64_t n = read_uleb(c);
                                if (c->bad || n > (uint64_t)(c->end - c->p)) {
                                        c->bad = true;
                                        continue;
                                }
                                s->cfa = plt_expression(c->p, n, &s->plt_threshold)
                                             ? FP_CFI_CFA_PLT
                                             : FP_CFI_UNSUPPORTED;
                                advance(c, n);
                                continue;
                        }
                        case 0x10: /* expression */
                        case 0x16: /* val_expression */
                        {
                                reg = read_uleb(c);
                                uint64_t n = read_uleb(c);
                                if (c->bad || n > (uint64_t)(c->end - c->p)) {
                                        c->bad = true;
                                        continue;
                                }
                                advance(c, n);
                                if ((rl = rule_of(s, reg)))
                                        *rl = (struct rule){RULE_OTHER, 0};
                                continue;
                        }
                        case 0x14: /* val_offset */
                        case 0x15: /* val_offset_sf */
                                reg = read_uleb(c);
                                if (op == 0x14)
                                        (void)read_uleb(c);
                                else
                                        (void)read_sleb(c);
                                if ((rl = rule_of(s, reg)))
                                        *rl = (struct rule){RULE_OTHER, 0};
                                continue;
                        case 0x2e: /* GNU_args_size */
                                (void)read_uleb(c);
                                continue;
                        default:
                                c->bad = true; /* an opcode we do not know: stop here */
                                continue;
                        }
                }
                /* An advance: the rules so far hold from *loc. */
                if (emit && *loc < end && (r = push_row(t, *loc, s)) < 0)
                        return r;
                *loc += delta;
        }
        return 0;
}

/* ---- entries ---- */

struct section {
        const uint8_t *data;
        size_t size;
        uint64_t vaddr;
        bool eh; /* .eh_frame (else .debug_frame) */
};

/* Parses the CIE at offset off of sec. */
static void parse_cie(const struct section *sec, uint64_t off, struct cie *cie)
{
        memset(cie, 0, sizeof(*cie));
        if (off >= sec->size)
                return; /* an FDE pointing outside the section */
        struct cursor c = {sec->data + off, sec->data + sec->size, sec->vaddr + off, false};
        uint64_t len = read_n(&c, 4);
        size_t id_size = 4;

        if (len == 0xffffffff) {
                len = read_n(&c, 8);
                id_size = 8;
        }
        if (c.bad || len > (uint64_t)(c.end - c.p))
                return;
        c.end = c.p + len;
        uint64_t id = read_n(&c, id_size);
        if (sec->eh ? id != 0 : id != (id_size == 4 ? 0xffffffffULL : UINT64_MAX))
                return;
        uint8_t version = (uint8_t)read_n(&c, 1);
        const char *aug = (const char *)c.p;
        size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
        if (aug_len == (size_t)(c.end - c.p))
                return;
        advance(&c, aug_len + 1);
        if (version >= 4) {
                uint8_t addr_size = (uint8_t)read_n(&c, 1);
                (void)read_n(&c, 1); /* segment selector size */
                if (addr_size != 8)
                        return;
        }
        cie->code_align = read_uleb(&c);
        cie->data_align = read_sleb(&c);
        cie->ra_reg = version == 1 ? read_n(&c, 1) : read_uleb(&c);
        cie->fde_enc = sec->eh ? PE_ABSPTR : PE_ABSPTR;
        if (aug[0] == 'z') {
                uint64_t n = read_uleb(&c);
                const uint8_t *aug_end = c.p + n;
                if (c.bad || n > (uint64_t)(c.end - c.p))
                        return;
                cie->has_aug_data = true;
                for (const char *a = aug + 1; *a && !c.bad; a++) {
                        if (*a == 'R') {
                                cie->fde_enc = (uint8_t)read_n(&c, 1);
                        } else if (*a == 'L') {
                                (void)read_n(&c, 1);
                        } else if (*a == 'P') {
                                uint8_t enc = (uint8_t)read_n(&c, 1);
                                (void)read_encoded(&c, enc & 0x7f);
                        } else if (*a == 'S' || *a == 'B') {
                                /* signal frame; ARM pointer auth: no data */
                        } else {
                                break; /* unknown: the length lets us skip the rest */
                        }
                }
                c.vaddr += (uint64_t)(aug_end - c.p);
                c.p = aug_end;
        } else if (aug[0] != 0) {
                return; /* an augmentation we cannot skip */
        }
        if (c.bad || cie->code_align == 0 || cie->ra_reg != REG_RA)
                return;
        cie->insns = c.p;
        cie->insns_end = c.end;
        cie->insns_vaddr = c.vaddr;
        cie->ok = true;
}

/* Parses one section; rows are appended to t. */
static int parse_section(struct fp_cfi *t, const struct section *sec)
{
        uint64_t off = 0;
        uint64_t cached_cie = UINT64_MAX;
        struct cie cie = {0};

        while (off + 4 <= sec->size) {
                struct cursor c = {sec->data + off, sec->data + sec->size, sec->vaddr + off, false};
                uint64_t len = read_n(&c, 4);
                size_t id_size = 4;
                if (len == 0)
                        break; /* the terminator of .eh_frame */
                if (len == 0xffffffff) {
                        len = read_n(&c, 8);
                        id_size = 8;
                }
                if (c.bad || len > (uint64_t)(c.end - c.p))
                        return -EBADMSG;
                uint64_t next = (uint64_t)(c.p - sec->data) + len;
                c.end = c.p + len;
                uint64_t id_pos = (uint64_t)(c.p - sec->data);
                uint64_t id = read_n(&c, id_size);
                bool is_cie = sec->eh ? id == 0 : id == (id_size == 4 ? 0xffffffffULL : UINT64_MAX);
                if (!is_cie) {
                        uint64_t cie_off = sec->eh ? id_pos - id : id;
                        if (sec->eh && id > id_pos)
                                return -EBADMSG;
                        if (cie_off != cached_cie) {
                                parse_cie(sec, cie_off, &cie);
                                cached_cie = cie_off;
                        }
                        if (cie.ok) {
                                uint64_t start = read_encoded(&c, cie.fde_enc);
                                uint64_t range = read_encoded(&c, cie.fde_enc & PE_FORMAT);
                                if (cie.has_aug_data) {
                                        uint64_t n = read_uleb(&c);
                                        if (n <= (uint64_t)(c.end - c.p))
                                                advance(&c, n);
                                        else
                                                c.bad = true;
                                }
                                if (!c.bad && range && start + range > start) {
                                        struct state initial = {.cfa = FP_CFI_UNSUPPORTED,
                                                                .rbp = {RULE_SAME, 0},
                                                                .ra = {RULE_UNDEF, 0}};
                                        struct cursor ci = {cie.insns, cie.insns_end,
                                                            cie.insns_vaddr, false};
                                        uint64_t loc = start;
                                        int r = run(t, &ci, &cie, &initial, &initial, &loc,
                                                    start + range, false);
                                        struct state s = initial;
                                        loc = start;
                                        if (r >= 0 && !ci.bad)
                                                r = run(t, &c, &cie, &s, &initial, &loc,
                                                        start + range, true);
                                        if (r < 0)
                                                return r;
                                        /* The last rules hold to the end of the range. */
                                        if (!ci.bad && loc < start + range &&
                                            (r = push_row(t, loc, &s)) < 0)
                                                return r;
                                        struct state none = {.cfa = FP_CFI_NONE,
                                                             .ra = {RULE_OFFSET, -8}};
                                        if ((r = push_row(t, start + range, &none)) < 0)
                                                return r;
                                }
                        }
                }
                off = next;
        }
        return 0;
}

/* Section data by name (decompressed when SHF_COMPRESSED), or NULL. */
static Elf_Data *section_data(Elf *elf, const char *name, uint64_t *ret_vaddr)
{
        size_t shstrndx;
        Elf_Scn *scn = NULL;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return NULL;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
                        continue;
                const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
                if (!n || strcmp(n, name) != 0)
                        continue;
                if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
                        return NULL;
                *ret_vaddr = sh.sh_addr;
                Elf_Data *d = elf_getdata(scn, NULL);
                return d && d->d_buf && d->d_size ? d : NULL;
        }
        return NULL;
}

static int cmp_row(const void *a, const void *b)
{
        const struct fp_cfi_row *x = a, *y = b;
        if (x->pc != y->pc)
                return x->pc < y->pc ? -1 : 1;
        /* At one address a real row wins over the end of the previous function. */
        return (x->cfa != FP_CFI_NONE) - (y->cfa != FP_CFI_NONE);
}

int fp_cfi_compile(Elf *elf, struct fp_cfi **ret)
{
        struct fp_cfi *t = calloc(1, sizeof(*t));
        bool any = false;
        int r = 0;

        if (!t)
                return -ENOMEM;
        static const struct {
                const char *name;
                bool eh;
        } secs[] = {{".eh_frame", true}, {".debug_frame", false}};
        for (size_t i = 0; i < 2 && r >= 0; i++) {
                uint64_t vaddr = 0;
                Elf_Data *d = section_data(elf, secs[i].name, &vaddr);
                if (!d)
                        continue;
                any = true;
                struct section s = {d->d_buf, d->d_size, vaddr, secs[i].eh};
                r = parse_section(t, &s);
                if (r == -EBADMSG && t->n)
                        r = 0; /* keep what was good */
        }
        if (r >= 0 && !any)
                r = -ENODATA;
        if (r >= 0 && t->n == 0)
                r = -ENODATA;
        if (r < 0) {
                fp_cfi_free(t);
                return r;
        }
        /* Sort (FDEs need not be in order), then keep one row per address. */
        qsort(t->rows, t->n, sizeof(*t->rows), cmp_row);
        size_t w = 0;
        for (size_t i = 0; i < t->n; i++) {
                if (w && t->rows[w - 1].pc == t->rows[i].pc) {
                        t->rows[w - 1] = t->rows[i];
                        continue;
                }
                t->rows[w++] = t->rows[i];
        }
        t->n = w;
        t->base = t->rows[0].pc & ~(((uint64_t)1 << PAGE_SHIFT) - 1);
        uint64_t span = t->rows[t->n - 1].pc - t->base;
        if (span >> PAGE_SHIFT < (1u << 24)) { /* code past 64 GiB: no index, plain search */
                t->n_pages = (size_t)(span >> PAGE_SHIFT) + 1;
                t->page = malloc((t->n_pages + 1) * sizeof(*t->page));
                if (!t->page) {
                        fp_cfi_free(t);
                        return -ENOMEM;
                }
                size_t ri = 0;
                for (size_t p = 0; p <= t->n_pages; p++) {
                        uint64_t at = t->base + ((uint64_t)p << PAGE_SHIFT);
                        while (ri < t->n && t->rows[ri].pc < at)
                                ri++;
                        t->page[p] = (uint32_t)ri;
                }
        }
        *ret = t;
        return 0;
}

int fp_cfi_compile_file(const char *path, struct fp_cfi **ret)
{
        struct stat st;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        int r;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return -EINVAL;
        }
        elf_version(EV_CURRENT);
        Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        if (!elf || elf_kind(elf) != ELF_K_ELF) {
                if (elf)
                        elf_end(elf);
                close(fd);
                return -ENOEXEC;
        }
        r = fp_cfi_compile(elf, ret);
        elf_end(elf);
        close(fd);
        return r;
}

void fp_cfi_free(struct fp_cfi *c)
{
        if (!c)
                return;
        free(c->rows);
        free(c->page);
        free(c);
}

size_t fp_cfi_bytes(const struct fp_cfi *c)
{
        return c ? sizeof(*c) + c->cap * sizeof(*c->rows) + c->n_pages * sizeof(*c->page) : 0;
}

size_t fp_cfi_n_rows(const struct fp_cfi *c)
{
        return c ? c->n : 0;
}

const struct fp_cfi_row *fp_cfi_row(const struct fp_cfi *c, size_t i)
{
        return c && i < c->n ? &c->rows[i] : NULL;
}

const struct fp_cfi_row *fp_cfi_find(const struct fp_cfi *c, uint64_t vaddr)
{
        size_t lo = 0, hi;

        if (!c || c->n == 0 || vaddr < c->rows[0].pc)
                return NULL;
        hi = c->n;
        if (c->page) {
                uint64_t p = (vaddr - c->base) >> PAGE_SHIFT;
                if (p < c->n_pages) {
                        /* The answer is the last row before page p + 1's first, at or after
                         * the row before page p's first. */
                        lo = c->page[p] ? c->page[p] - 1 : 0;
                        hi = c->page[p + 1];
                        if (hi <= lo)
                                hi = lo + 1;
                }
        }
        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                if (c->rows[mid].pc <= vaddr)
                        lo = mid;
                else
                        hi = mid;
        }
        return &c->rows[lo];
}
