/* SPDX-License-Identifier: MIT */
/*
 * Perl interpreters: recognised in a file, their layouts, their subs'
 * names read from a process (perl.h).
 */
#include "perl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtelf.h"
#include "rtfind.h"
#include "symbols.h"

/* ---- layouts ---- */

/* Perl 5.36, threaded (Debian 12's), from its intrpvar.h, cop.h, sv.h, cv.h, gv.h and hv.h. */
static const struct fp_perl_layout perl536 = {
    .revision = 5,
    .version = 36,
    .interp_curcop = 0xd0,
    .interp_curstackinfo = 0xe0,
    .interp_main_cv = 0x708,
    .interp_compiling = 0x790,
    .interp_origfilename = 0x5c0,
    .si_cxstack = 0x08,
    .si_prev = 0x10,
    .si_cxsubix = 0x28,
    .si_type = 0x2c,
    .cx_size = 0x68,
    .cx_type = 0x00,
    .cx_oldcop = 0x10,
    .cx_retop = 0x30,
    .cx_old_cxsubix = 0x38,
    .cx_cv = 0x48,
    .cop_line = 0x24,
    .cop_file = 0x30,
    .sv_any = 0x00,
    .sv_flags = 0x0c,
    .xcv_stash = 0x20,
    .xcv_gv = 0x38,
    .xcv_file = 0x40,
    .xcv_flags = 0x5c,
    .xgv_namehek = 0x20,
    .xgv_stash = 0x28,
    .hv_aux = 0x20, /* 5.36: struct xpvhv_with_aux, the aux part after the body's 0x20 bytes */
    .aux_name = 0x00,
    .aux_name_count = 0x1c,
    .hek_len = 0x04,
    .hek_key = 0x08,
    .cxt_mask = 0x0f,
    .cxt_block = 2,
    .cxt_sub = 9,
    .cxt_format = 10,
    .cxt_eval = 11,
    .cxp_sub_re_fake = 0x80,
    .si_main = 1,
    .t_pvgv = 9,
    .t_pvhv = 12,
    .t_pvcv = 13,
    .t_pvfm = 14,
    .sv_ook = 0x02000000,
    .cvf_named = 0x8000,
    .cvf_lexical = 0x10000,
};

const struct fp_perl_layout *fp_perl_layout_of(int revision, int version)
{
        if (revision == 5 && version == 36)
                return &perl536;
        return NULL;
}

/* ---- in a file ---- */

struct find {
        GElf_Sym runops, debug, context, revision, version, subversion;
        bool have_runops, have_debug, have_context, have_revision, have_version, have_subversion;
};

static void find_one(void *userdata, const char *name, const GElf_Sym *s)
{
        struct find *f = userdata;
        struct {
                const char *name;
                GElf_Sym *sym;
                bool *have;
        } want[] = {
            {"Perl_runops_standard", &f->runops, &f->have_runops},
            {"Perl_runops_debug", &f->debug, &f->have_debug},
            {"PL_revision", &f->revision, &f->have_revision},
            {"PL_version", &f->version, &f->have_version},
            {"PL_subversion", &f->subversion, &f->have_subversion},
        };

        if (strcmp(name, "PL_current_context") == 0) {
                if (GELF_ST_TYPE(s->st_info) == STT_TLS) {
                        f->context = *s;
                        f->have_context = true;
                }
                return;
        }
        if (!s->st_value)
                return;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                if (strcmp(name, want[i].name) == 0) {
                        *want[i].sym = *s;
                        *want[i].have = true;
                }
}

/*
 * The GOT slots of the file's relocations that reach PL_current_context
 * (at offset context of its TLS block): the one the dynamic linker fills
 * with its offset from the thread pointer (R_X86_64_TPOFF64: the
 * executable's static block), and the one it fills with the block's
 * module ID (R_X86_64_DTPMOD64: a library's own). A relocation of no
 * symbol is the file's own block: its TPOFF64 one is PL_current_context's
 * when its addend is that offset.
 */
struct tls_slots {
        uint64_t context, tpoff, dtpmod;
};

static void tls_slot(void *userdata, const GElf_Rela *r, const char *sym)
{
        struct tls_slots *t = userdata;
        unsigned type = (unsigned)GELF_R_TYPE(r->r_info);

        if (type != R_X86_64_TPOFF64 && type != R_X86_64_DTPMOD64)
                return;
        if (GELF_R_SYM(r->r_info) == 0
                ? type == R_X86_64_TPOFF64 && (uint64_t)r->r_addend != t->context
                : !sym || strcmp(sym, "PL_current_context") != 0)
                return;
        if (type == R_X86_64_TPOFF64 && !t->tpoff)
                t->tpoff = r->r_offset;
        else if (type == R_X86_64_DTPMOD64 && !t->dtpmod)
                t->dtpmod = r->r_offset;
}

/* The byte at symbol s, -1 when it has none. */
static int byte_of(Elf *elf, const GElf_Sym *s, bool have)
{
        unsigned char b;

        if (!have || !fp_rt_elf_read(elf, s->st_value, &b, 1))
                return -1;
        return b;
}

void fp_perl_inspect(Elf *elf, struct fp_perl_facts *ret)
{
        struct find f = {0};

        memset(ret, 0, sizeof(*ret));
        ret->revision = ret->version = ret->subversion = -1;
        fp_rt_elf_symbols(elf, find_one, &f);
        if (!f.have_runops || !f.have_context)
                return;
        ret->eval_start = f.runops.st_value;
        ret->eval_end = f.runops.st_value + (f.runops.st_size ? f.runops.st_size : 1);
        if (f.have_debug) {
                ret->debug_start = f.debug.st_value;
                ret->debug_end = f.debug.st_value + (f.debug.st_size ? f.debug.st_size : 1);
        }
        ret->has_context = 1;
        ret->tls_context = f.context.st_value;
        struct tls_slots t = {.context = ret->tls_context};
        fp_rt_elf_relocs(elf, tls_slot, &t);
        ret->tpoff_slot = t.tpoff;
        ret->dtpmod_slot = t.dtpmod;
        ret->revision = byte_of(elf, &f.revision, f.have_revision);
        ret->version = byte_of(elf, &f.version, f.have_version);
        ret->subversion = byte_of(elf, &f.subversion, f.have_subversion);
        if (ret->revision < 0 || ret->version < 0 || ret->subversion < 0)
                ret->revision = ret->version = ret->subversion = -1;
}

int fp_perl_judge(const struct fp_perl_facts *f, const char *path, struct fp_perl_binary *ret,
                  char *why, size_t why_len)
{
        memset(ret, 0, sizeof(*ret));
        if (!f->has_context)
                return 0;
        if (f->revision < 0) {
                snprintf(why, why_len, "%s has Perl's run loop but no version", path);
                return -EPROTONOSUPPORT;
        }
        ret->layout = fp_perl_layout_of(f->revision, f->version);
        if (!ret->layout) {
                snprintf(why, why_len, "%s is Perl %d.%d.%d, which fleetprof does not read (5.36)",
                         path, f->revision, f->version, f->subversion);
                return -EPROTONOSUPPORT;
        }
        if (f->tpoff_slot) {
                ret->tls = FP_PERL_TLS_STATIC;
                ret->tls_slot = f->tpoff_slot;
        } else if (f->dtpmod_slot) {
                ret->tls = FP_PERL_TLS_MODULE;
                ret->tls_slot = f->dtpmod_slot;
        } else {
                snprintf(why, why_len,
                         "%s is a Perl %d.%d whose threads' interpreters are reached through no "
                         "slot of its relocations: not read",
                         path, f->revision, f->version);
                return -EPROTONOSUPPORT;
        }
        ret->revision = f->revision;
        ret->version = f->version;
        ret->subversion = f->subversion;
        ret->tls_context = f->tls_context;
        ret->eval_start = f->eval_start;
        ret->eval_end = f->eval_end;
        ret->debug_start = f->debug_start;
        ret->debug_end = f->debug_end;
        return 1;
}

/* ---- objects read from a process ---- */

struct reader {
        pid_t pid;
        const struct fp_perl_layout *l;
};

static int peek64(const struct reader *rd, uint64_t addr, uint64_t *v)
{
        return fp_rt_peek(rd->pid, addr, v, 8);
}

static int peek32(const struct reader *rd, uint64_t addr, uint32_t *v)
{
        return fp_rt_peek(rd->pid, addr, v, 4);
}

/* The key of the HEK at hek into buf (cut to size - 1): 0, or -EFAULT. */
static int read_hek(const struct reader *rd, uint64_t hek, char *buf, size_t size)
{
        int32_t len;

        buf[0] = 0;
        if (!hek || fp_rt_peek(rd->pid, hek + (uint64_t)rd->l->hek_len, &len, 4) < 0 || len < 0)
                return -EFAULT;
        size_t n = (size_t)len < size - 1 ? (size_t)len : size - 1;
        if (n && fp_rt_peek(rd->pid, hek + (uint64_t)rd->l->hek_key, buf, n) < 0)
                return -EFAULT;
        buf[n] = 0;
        if (memchr(buf, 0, n))
                return -EFAULT; /* a name holds no NUL: not a HEK */
        return 0;
}

/* The name of the stash (HV) at hv (HvNAME), "" when it has none: 0, or -EFAULT. */
static int stash_name(const struct reader *rd, uint64_t hv, char *buf, size_t size)
{
        const struct fp_perl_layout *l = rd->l;
        uint32_t flags;
        uint64_t body, name;
        int32_t count;

        buf[0] = 0;
        if (!hv || peek32(rd, hv + (uint64_t)l->sv_flags, &flags) < 0 ||
            (flags & 0xff) != l->t_pvhv)
                return -EFAULT;
        if (!(flags & l->sv_ook))
                return 0; /* no aux part: no name */
        if (peek64(rd, hv + (uint64_t)l->sv_any, &body) < 0 || !body)
                return -EFAULT;
        uint64_t aux = body + (uint64_t)l->hv_aux;
        if (fp_rt_peek(rd->pid, aux + (uint64_t)l->aux_name_count, &count, 4) < 0 ||
            peek64(rd, aux + (uint64_t)l->aux_name, &name) < 0)
                return -EFAULT;
        /* With names (an aliased stash), the first is its own: names[0]. */
        if (count && name && peek64(rd, name, &name) < 0)
                return -EFAULT;
        return name ? read_hek(rd, name, buf, size) : 0;
}

int fp_perl_code_read(pid_t pid, const struct fp_perl_layout *l, uint64_t cv,
                      struct fp_perl_code *ret, uint64_t *ret_body, uint64_t *ret_gv)
{
        const struct reader rd = {pid, l};
        char pkg[FP_PERL_NAME_MAX], name[FP_PERL_NAME_MAX];
        uint32_t flags, cvflags, type;
        uint64_t body, gv, file, stash;

        memset(ret, 0, sizeof(*ret));
        if (!cv || peek32(&rd, cv + (uint64_t)l->sv_flags, &flags) < 0 ||
            peek64(&rd, cv + (uint64_t)l->sv_any, &body) < 0 || !body)
                return -EFAULT;
        type = flags & 0xff;
        if (type != l->t_pvcv && type != l->t_pvfm)
                return -EFAULT;
        if (peek32(&rd, body + (uint64_t)l->xcv_flags, &cvflags) < 0 ||
            peek64(&rd, body + (uint64_t)l->xcv_gv, &gv) < 0 ||
            peek64(&rd, body + (uint64_t)l->xcv_file, &file) < 0 || !gv)
                return -EFAULT;
        *ret_body = body;
        *ret_gv = gv;
        if (cvflags & l->cvf_named) {
                /* A sub stored without a glob: the name's HEK, its package the CV's stash. */
                if (read_hek(&rd, gv, name, sizeof(name)) < 0)
                        return -EFAULT;
                if (cvflags & l->cvf_lexical) {
                        snprintf(ret->name, sizeof(ret->name), "%s", name); /* a `my sub` */
                        pkg[0] = 0;
                } else if (peek64(&rd, body + (uint64_t)l->xcv_stash, &stash) < 0 ||
                           stash_name(&rd, stash, pkg, sizeof(pkg)) < 0) {
                        return -EFAULT;
                }
        } else {
                uint64_t gvbody, hek;
                uint32_t gvflags;
                if (peek32(&rd, gv + (uint64_t)l->sv_flags, &gvflags) < 0 ||
                    (gvflags & 0xff) != l->t_pvgv ||
                    peek64(&rd, gv + (uint64_t)l->sv_any, &gvbody) < 0 || !gvbody ||
                    peek64(&rd, gvbody + (uint64_t)l->xgv_namehek, &hek) < 0 ||
                    peek64(&rd, gvbody + (uint64_t)l->xgv_stash, &stash) < 0 ||
                    read_hek(&rd, hek, name, sizeof(name)) < 0 ||
                    stash_name(&rd, stash, pkg, sizeof(pkg)) < 0)
                        return -EFAULT;
        }
        if (!(cvflags & l->cvf_lexical) &&
            snprintf(ret->name, sizeof(ret->name), "%s%s%s", pkg, pkg[0] ? "::" : "", name) < 0)
                return -EFAULT;
        if (file && fp_rt_peek_cstr(pid, file, ret->filename, sizeof(ret->filename)) == -EFAULT)
                ret->filename[0] = 0;
        return 0;
}

int fp_perl_main_read(pid_t pid, const struct fp_perl_layout *l, uint64_t interp,
                      struct fp_perl_code *ret)
{
        const struct reader rd = {pid, l};
        uint64_t file;

        memset(ret, 0, sizeof(*ret));
        snprintf(ret->name, sizeof(ret->name), "main::RUNTIME");
        if (!interp || peek64(&rd, interp + (uint64_t)l->interp_origfilename, &file) < 0)
                return -EFAULT;
        if (file && fp_rt_peek_cstr(pid, file, ret->filename, sizeof(ret->filename)) == -EFAULT)
                ret->filename[0] = 0;
        return 0;
}

/* ---- in a process ---- */

static void inspect(Elf *elf, void *facts)
{
        fp_perl_inspect(elf, facts);
}

static bool is_runtime(const void *facts)
{
        return ((const struct fp_perl_facts *)facts)->has_context != 0;
}

const struct fp_sym_inspector fp_perl_inspector = {"perl", sizeof(struct fp_perl_facts), inspect,
                                                   is_runtime, NULL};

static int judge(const void *facts, const char *path, void *bin, char *why, size_t why_len)
{
        return fp_perl_judge(facts, path, bin, why, why_len);
}

int fp_perl_find(struct fp_maps *m, const struct fp_perl_binary **ret_bin, uint64_t *ret_bias,
                 const char **ret_why)
{
        return fp_rt_find(m, &fp_perl_inspector, judge, sizeof(**ret_bin), (const void **)ret_bin,
                          ret_bias, ret_why);
}
