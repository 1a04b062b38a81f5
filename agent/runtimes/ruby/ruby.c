/* SPDX-License-Identifier: MIT */
/*
 * Ruby interpreters: recognised in a file, their layouts, their frames'
 * names and lines read from a process (ruby.h).
 */
#include "ruby.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtelf.h"
#include "rtfind.h"
#include "symbols.h"

/* ---- layouts ---- */

/* Ruby 3.1, from its vm_core.h, iseq.h, method.h, symbol.h, internal/class.h, st.h and the public
 * headers. */
static const struct fp_ruby_layout ruby31 = {
    .major = 3,
    .minor = 1,
    .ec_vm_stack = 0,
    .ec_vm_stack_size = 8,
    .ec_cfp = 16,
    .cfp_size = 64, /* pc, sp, iseq, self, ep, block_code, __bp__, jit_return */
    .cfp_pc = 0,
    .cfp_iseq = 16,
    .cfp_ep = 32,
    .iseq_body = 16,
    .body_iseq_size = 4,
    .body_iseq_encoded = 8,
    .body_pathobj = 64,
    .body_label = 80,
    .body_first_lineno = 88,
    .body_insns_info = 120,
    .body_insns_positions = 128,
    .body_insns_size = 136,
    .body_succ_index_table = 144,
    .insn_info_size = 12,
    .insn_info_line = 0,
    .me_defined_class = 8,
    .me_def = 16,
    .def_original_id = 32,
    .string_len = 16,
    .string_ptr = 24,
    .string_ary = 16,
    .array_len = 16,
    .array_ptr = 32,
    .array_ary = 16,
    .string_noembed = 1u << 13,
    .string_embed_len_mask = 0x1fu << 14,
    .string_embed_len_shift = 14,
    .array_embed = 1u << 13,
    .array_embed_len_mask = 3u << 15,
    .array_embed_len_shift = 15,
    .class_ext = 24,
    .ext_iv_tbl = 8,
    .st_entries_start = 32,
    .st_entries_bound = 40,
    .st_entries = 48,
    .st_entry_size = 24,
    .symbols_last_id = 0,
    .symbols_ids = 16,
    .id_scope_shift = 4,
    .id_entry_unit = 512,
    .id_entry_size = 2,
    .last_op_id = 169,
    .frame_cframe = 0x80,
    .frame_finish = 0x20,
    .env_local = 0x02,
    .t_mask = 0x1f,
    .t_string = 0x05,
    .t_array = 0x07,
    .t_class = 0x02,
    .t_module = 0x03,
    .t_iclass = 0x1c,
    .t_imemo = 0x1a,
    .fl_ushift = 12,
    .imemo_ment = 6,
    .imemo_svar = 2,
    .fl_singleton = 1u << 12,
};

const struct fp_ruby_layout *fp_ruby_layout_of(int major, int minor)
{
        if (major == 3 && minor == 1)
                return &ruby31;
        return NULL;
}

/* ---- in a file ---- */

struct find {
        GElf_Sym vm, exec, ec, version, immortal;
        bool have_vm, have_exec, have_ec, have_version, have_immortal;
};

static void find_one(void *userdata, const char *name, const GElf_Sym *s)
{
        struct find *f = userdata;

        if (strcmp(name, "ruby_current_vm_ptr") == 0) {
                f->vm = *s;
                f->have_vm = true;
        } else if (strcmp(name, "rb_vm_exec") == 0) {
                f->exec = *s;
                f->have_exec = true;
        } else if (strcmp(name, "ruby_current_ec") == 0 && GELF_ST_TYPE(s->st_info) == STT_TLS) {
                f->ec = *s;
                f->have_ec = true;
        } else if (strcmp(name, "ruby_version") == 0) {
                f->version = *s;
                f->have_version = true;
        } else if (strcmp(name, "rb_sym_immortal_count") == 0) {
                f->immortal = *s;
                f->have_immortal = true;
        }
}

/*
 * The slot of the file's relocations that the dynamic linker fills with
 * its TLS module's ID (R_X86_64_DTPMOD64): 0 when none.
 */
static void module_slot(void *userdata, const GElf_Rela *r, const char *sym)
{
        uint64_t *slot = userdata;

        (void)sym;
        if (!*slot && GELF_R_TYPE(r->r_info) == R_X86_64_DTPMOD64)
                *slot = r->r_offset;
}

static uint64_t tls_module_slot(Elf *elf)
{
        uint64_t slot = 0;

        fp_rt_elf_relocs(elf, module_slot, &slot);
        return slot;
}

/*
 * ruby_global_symbols (a hidden symbol): what rb_sym_immortal_count()
 * returns is its first field, read RIP-relative by the function's first
 * instruction ("mov disp32(%rip), %eax" or "%rax"). 0 when it is not so.
 */
static uint64_t symbols_of(Elf *elf, const GElf_Sym *fn)
{
        unsigned char b[8];
        unsigned i = 0;

        if (!fp_rt_elf_read(elf, fn->st_value, b, sizeof(b)))
                return 0;
        if ((b[0] & 0xf0) == 0x40)
                i++; /* a REX prefix */
        if (b[i] != 0x8b || (b[i + 1] & 0xc7) != 0x05)
                return 0;
        int32_t disp;
        memcpy(&disp, b + i + 2, 4);
        return fn->st_value + i + 6 + (int64_t)disp;
}

void fp_ruby_inspect(Elf *elf, struct fp_ruby_facts *ret)
{
        struct find f = {0};
        char v[16] = {0};

        memset(ret, 0, sizeof(*ret));
        ret->major = ret->minor = ret->micro = -1;
        fp_rt_elf_symbols(elf, find_one, &f);
        if (!f.have_vm || !f.have_exec)
                return;
        ret->vm_ptr = f.vm.st_value;
        ret->eval_start = f.exec.st_value;
        ret->eval_end = f.exec.st_value + (f.exec.st_size ? f.exec.st_size : 1);
        ret->has_ec = f.have_ec;
        ret->tls_ec = f.ec.st_value;
        ret->tls_module_slot = tls_module_slot(elf);
        ret->symbols = f.have_immortal ? symbols_of(elf, &f.immortal) : 0;
        if (f.have_version && fp_rt_elf_read(elf, f.version.st_value, v, sizeof(v) - 1) &&
            sscanf(v, "%d.%d.%d", &ret->major, &ret->minor, &ret->micro) != 3)
                ret->major = ret->minor = ret->micro = -1;
}

int fp_ruby_judge(const struct fp_ruby_facts *f, const char *path, struct fp_ruby_binary *ret,
                  char *why, size_t why_len)
{
        memset(ret, 0, sizeof(*ret));
        if (!f->vm_ptr)
                return 0;
        if (f->major < 0) {
                snprintf(why, why_len, "%s has Ruby's VM but no version string", path);
                return -EPROTONOSUPPORT;
        }
        ret->layout = fp_ruby_layout_of(f->major, f->minor);
        if (!ret->layout) {
                snprintf(why, why_len, "%s is Ruby %d.%d, which fleetprof does not read (3.1)",
                         path, f->major, f->minor);
                return -EPROTONOSUPPORT;
        }
        if (!f->has_ec || !f->tls_module_slot) {
                snprintf(why, why_len,
                         "%s is a Ruby %d.%d whose threads' contexts are not in a shared "
                         "library's thread-local block: not read",
                         path, f->major, f->minor);
                return -EPROTONOSUPPORT;
        }
        ret->major = f->major;
        ret->minor = f->minor;
        ret->micro = f->micro;
        ret->tls_module_slot = f->tls_module_slot;
        ret->tls_ec = f->tls_ec;
        ret->symbols = f->symbols;
        ret->eval_start = f->eval_start;
        ret->eval_end = f->eval_end;
        return 1;
}

/* ---- objects read from a process ---- */

struct reader {
        pid_t pid;
        const struct fp_ruby_layout *l;
        uint64_t symbols;
};

static int peek64(const struct reader *rd, uint64_t addr, uint64_t *v)
{
        return fp_rt_peek(rd->pid, addr, v, 8);
}

/* An object's type (RBasic.flags & T_MASK), or -1 for no heap object. */
static int type_of(const struct reader *rd, uint64_t v, uint64_t *flags)
{
        if (!v || (v & 7) || peek64(rd, v, flags) < 0)
                return -1;
        return (int)(*flags & rd->l->t_mask);
}

/* A String's bytes into buf (cut to size), text only: 0 or -EFAULT. */
static int read_string(const struct reader *rd, uint64_t v, char *buf, size_t size)
{
        const struct fp_ruby_layout *l = rd->l;
        uint64_t flags, len, ptr;

        buf[0] = 0;
        if (type_of(rd, v, &flags) != l->t_string)
                return -EFAULT;
        if (flags & l->string_noembed) {
                if (peek64(rd, v + (uint64_t)l->string_len, &len) < 0 ||
                    peek64(rd, v + (uint64_t)l->string_ptr, &ptr) < 0)
                        return -EFAULT;
        } else {
                len = (flags & l->string_embed_len_mask) >> l->string_embed_len_shift;
                ptr = v + (uint64_t)l->string_ary;
        }
        if (len > 1 << 20)
                return -EFAULT;
        size_t n = len < size - 1 ? (size_t)len : size - 1;
        if (n && fp_rt_peek(rd->pid, ptr, buf, n) < 0)
                return -EFAULT;
        buf[n] = 0;
        return strlen(buf) == n ? 0 : -EFAULT;
}

/* An Array's length and where its elements are: 0 or -EFAULT. */
static int read_array(const struct reader *rd, uint64_t v, uint64_t *len, uint64_t *ptr)
{
        const struct fp_ruby_layout *l = rd->l;
        uint64_t flags;

        if (type_of(rd, v, &flags) != l->t_array)
                return -EFAULT;
        if (flags & l->array_embed) {
                *len = (flags & l->array_embed_len_mask) >> l->array_embed_len_shift;
                *ptr = v + (uint64_t)l->array_ary;
                return 0;
        }
        if (peek64(rd, v + (uint64_t)l->array_len, len) < 0 ||
            peek64(rd, v + (uint64_t)l->array_ptr, ptr) < 0)
                return -EFAULT;
        return 0;
}

static int array_at(const struct reader *rd, uint64_t v, uint64_t i, uint64_t *ret)
{
        uint64_t len, ptr;

        if (read_array(rd, v, &len, &ptr) < 0 || i >= len)
                return -EFAULT;
        return peek64(rd, ptr + 8 * i, ret);
}

/* An ID's name, as rb_id2str() finds it in ruby_global_symbols: 0 or -EFAULT. */
static int id_name(const struct reader *rd, uint64_t id, char *buf, size_t size)
{
        const struct fp_ruby_layout *l = rd->l;
        uint64_t serial = id > l->last_op_id ? id >> l->id_scope_shift : id, ids, chunk, str;
        uint32_t last = 0;

        buf[0] = 0;
        if (!rd->symbols || !serial ||
            fp_rt_peek(rd->pid, rd->symbols + (uint64_t)l->symbols_last_id, &last, 4) < 0 ||
            serial > last || peek64(rd, rd->symbols + (uint64_t)l->symbols_ids, &ids) < 0 ||
            array_at(rd, ids, serial / l->id_entry_unit, &chunk) < 0 ||
            array_at(rd, chunk, (serial % l->id_entry_unit) * l->id_entry_size, &str) < 0)
                return -EFAULT;
        return read_string(rd, str, buf, size);
}

/* The value of a class's instance variable named name (its iv_tbl scanned): 0 when none. */
static uint64_t class_ivar(const struct reader *rd, uint64_t klass, const char *name)
{
        const struct fp_ruby_layout *l = rd->l;
        uint64_t ext, tbl, start, bound, entries;
        char key[64];

        if (peek64(rd, klass + (uint64_t)l->class_ext, &ext) < 0 || !ext ||
            peek64(rd, ext + (uint64_t)l->ext_iv_tbl, &tbl) < 0 || !tbl ||
            peek64(rd, tbl + (uint64_t)l->st_entries_start, &start) < 0 ||
            peek64(rd, tbl + (uint64_t)l->st_entries_bound, &bound) < 0 ||
            peek64(rd, tbl + (uint64_t)l->st_entries, &entries) < 0 || bound > 4096)
                return 0;
        for (uint64_t i = start; i < bound; i++) {
                uint64_t e[3]; /* hash, key, record */
                if (fp_rt_peek(rd->pid, entries + i * (uint64_t)l->st_entry_size, e, sizeof(e)) < 0)
                        return 0;
                if (e[0] != UINT64_MAX && id_name(rd, e[1], key, sizeof(key)) == 0 &&
                    strcmp(key, name) == 0)
                        return e[2];
        }
        return 0;
}

/*
 * A class's path ("Foo::Bar") into buf, and whether the method is a
 * singleton's ("Foo.bar"): 0 or -EFAULT (anonymous, unreadable).
 */
static int class_path(const struct reader *rd, uint64_t klass, char *buf, size_t size,
                      bool *singleton)
{
        const struct fp_ruby_layout *l = rd->l;
        uint64_t flags;
        int t = type_of(rd, klass, &flags);

        *singleton = false;
        if (t == l->t_iclass) { /* a module included: the module */
                if (peek64(rd, klass + 8, &klass) < 0)
                        return -EFAULT;
                t = type_of(rd, klass, &flags);
        }
        if (t != l->t_class && t != l->t_module)
                return -EFAULT;
        if (flags & l->fl_singleton) {
                *singleton = true;
                klass = class_ivar(rd, klass, "__attached__");
                t = type_of(rd, klass, &flags);
                if (t != l->t_class && t != l->t_module)
                        return -EFAULT;
        }
        uint64_t path = class_ivar(rd, klass, "__classpath__");
        if (!path)
                path = class_ivar(rd, klass, "__tmp_classpath__");
        return path ? read_string(rd, path, buf, size) : -EFAULT;
}

/* ---- frames ---- */

/* Reads the iseq body's lines: entries, and positions or the succinct index. */
static int read_lines(const struct reader *rd, uint64_t body, struct fp_ruby_code *c)
{
        const struct fp_ruby_layout *l = rd->l;
        uint64_t info, positions, succ;
        uint32_t size, iseq_size;

        if (peek64(rd, body + (uint64_t)l->body_insns_info, &info) < 0 ||
            peek64(rd, body + (uint64_t)l->body_insns_positions, &positions) < 0 ||
            peek64(rd, body + (uint64_t)l->body_succ_index_table, &succ) < 0 ||
            fp_rt_peek(rd->pid, body + (uint64_t)l->body_insns_size, &size, 4) < 0 ||
            fp_rt_peek(rd->pid, body + (uint64_t)l->body_iseq_size, &iseq_size, 4) < 0)
                return -EFAULT;
        if (!size || !info)
                return 0;
        if (size > FP_RUBY_LINES)
                size = FP_RUBY_LINES;
        unsigned char *raw = malloc((size_t)size * (size_t)l->insn_info_size);
        c->lines = malloc(size * sizeof(*c->lines));
        if (!raw || !c->lines ||
            fp_rt_peek(rd->pid, info, raw, (size_t)size * (size_t)l->insn_info_size) < 0) {
                free(raw);
                return -EFAULT;
        }
        for (uint32_t i = 0; i < size; i++)
                memcpy(&c->lines[i],
                       raw + (size_t)i * (size_t)l->insn_info_size + l->insn_info_line, 4);
        free(raw);
        c->n_lines = size;
        if (size == 1)
                return 0;
        if (positions) {
                c->positions = malloc(size * sizeof(*c->positions));
                if (!c->positions ||
                    fp_rt_peek(rd->pid, positions, c->positions, size * sizeof(*c->positions)) < 0)
                        return -EFAULT;
                return 0;
        }
        if (!succ)
                return -EFAULT;
        /* Six words of 9 7-bit ranks (the first 54 positions), then blocks of 512 positions. */
        /* As many blocks as the last instruction's position needs: one fewer than this at most. */
        size_t blocks = iseq_size > 54 ? (iseq_size - 54 + 511) / 512 : 0;
        c->succ = malloc((6 + blocks * 10) * 8);
        if (!c->succ)
                return -EFAULT;
        for (size_t b = blocks;; b--) {
                c->succ_words = 6 + b * 10;
                if (fp_rt_peek(rd->pid, succ, c->succ, c->succ_words * 8) == 0)
                        return 0;
                if (!b || b + 1 == blocks)
                        return -EFAULT;
        }
}

/* How many positions of the succinct index are set up to and including x (succ_index_lookup). */
static uint64_t succ_rank(const struct fp_ruby_code *c, uint64_t x)
{
        if (x < 54)
                return (c->succ[x / 9] >> ((x % 9) * 7)) & 0x7f;
        x -= 54;
        size_t blk = 6 + (x / 512) * 10;
        if (blk + 10 > c->succ_words)
                return 0;
        unsigned bit = (unsigned)(x % 512), sbi = bit / 64;
        uint64_t rank = (uint32_t)c->succ[blk];
        uint64_t small = sbi ? (c->succ[blk + 1] >> ((sbi - 1) * 9)) & 0x1ff : 0;
        uint64_t bits = c->succ[blk + 2 + sbi] << (63 - bit % 64);
        return rank + small + (uint64_t)__builtin_popcountll(bits);
}

int fp_ruby_line(const struct fp_ruby_code *c, uint64_t pc)
{
        if (!c->n_lines || pc < c->encoded)
                return 0;
        /* As Ruby's calc_lineno(): the pc is past the instruction that runs. */
        uint64_t pos = (pc - c->encoded) / 8;
        if (pos)
                pos--;
        uint64_t i;
        if (c->n_lines == 1) {
                i = 0;
        } else if (c->positions) {
                for (i = 0; i + 1 < c->n_lines && c->positions[i + 1] <= pos; i++)
                        ;
        } else {
                uint64_t rank = succ_rank(c, pos);
                if (!rank)
                        return 0;
                i = rank - 1;
        }
        return i < c->n_lines && c->lines[i] > 0 ? c->lines[i] : 0;
}

void fp_ruby_code_free(struct fp_ruby_code *c)
{
        free(c->lines);
        free(c->positions);
        free(c->succ);
        c->lines = NULL;
        c->positions = NULL;
        c->succ = NULL;
}

/*
 * A method entry's method: its name into fn (128 bytes), and into full
 * Class#name (Class.name for a singleton's, the name alone when no class
 * reads); *ret_stamp the stamp the BPF side gives a C function's frame.
 */
static int method_of(const struct reader *rd, uint64_t me, char *fn, char *full, size_t full_size,
                     uint32_t *ret_stamp)
{
        const struct fp_ruby_layout *l = rd->l;
        uint64_t def, id, klass;
        char cls[128];
        bool singleton;

        if (peek64(rd, me + (uint64_t)l->me_def, &def) < 0 || !def ||
            peek64(rd, def + (uint64_t)l->def_original_id, &id) < 0 ||
            peek64(rd, me + (uint64_t)l->me_defined_class, &klass) < 0)
                return -EFAULT;
        *ret_stamp = (uint32_t)(def >> 4) ^ ((uint32_t)id * 0x9e3779b1u);
        if (id_name(rd, id, fn, 128) < 0)
                return -EFAULT;
        if (class_path(rd, klass, cls, sizeof(cls), &singleton) == 0)
                snprintf(full, full_size, "%s%s%s", cls, singleton ? "." : "#", fn);
        else
                snprintf(full, full_size, "%s", fn);
        return 0;
}

/* A C function's method entry: its name as Class#name (Class.name for a singleton's). */
static int read_cfunc(const struct reader *rd, uint64_t me, struct fp_ruby_code *ret,
                      uint32_t *stamp)
{
        char fn[128];

        return method_of(rd, me, fn, ret->name, sizeof(ret->name), stamp);
}

/*
 * An iseq's label (name) as Ruby 3.4 writes it, with the class of the
 * frame's method entry me: "Shape#area" for "area", "Geometry.scale",
 * "block in Shape#area", "block (2 levels) in Object#run", where the
 * label ends in that method's own name; any other label (<main>,
 * <class:Shape>, a method defined from a block) stays as it is.
 */
static void qualify(const struct reader *rd, uint64_t me, char *name, size_t size)
{
        char fn[128], full[FP_RUBY_NAME_MAX], out[FP_RUBY_NAME_MAX];
        uint32_t stamp;
        const char *tail = name;

        if (!me || method_of(rd, me, fn, full, sizeof(full), &stamp) < 0)
                return;
        for (const char *in = strstr(name, " in "); in; in = strstr(in + 1, " in "))
                tail = in + 4;
        if (strcmp(tail, fn) != 0 || strcmp(full, fn) == 0)
                return;
        if (snprintf(out, sizeof(out), "%.*s%s", (int)(tail - name), name, full) < (int)sizeof(out))
                snprintf(name, size, "%s", out);
}

int fp_ruby_code_read(pid_t pid, const struct fp_ruby_layout *l, uint64_t symbols, uint64_t addr,
                      uint64_t me, bool native, struct fp_ruby_code *ret, uint32_t *ret_stamp)
{
        const struct reader rd = {pid, l, symbols};
        uint64_t body, label, pathobj, first;
        int r;

        memset(ret, 0, sizeof(*ret));
        if (native)
                return read_cfunc(&rd, addr, ret, ret_stamp);
        if (peek64(&rd, addr + (uint64_t)l->iseq_body, &body) < 0 || !body ||
            peek64(&rd, body + (uint64_t)l->body_label, &label) < 0 ||
            peek64(&rd, body + (uint64_t)l->body_first_lineno, &first) < 0 ||
            peek64(&rd, body + (uint64_t)l->body_pathobj, &pathobj) < 0 ||
            peek64(&rd, body + (uint64_t)l->body_iseq_encoded, &ret->encoded) < 0)
                return -EFAULT;
        *ret_stamp = (uint32_t)(label >> 4) ^ ((uint32_t)first * 0x9e3779b1u);
        if ((r = read_string(&rd, label, ret->name, sizeof(ret->name))) < 0)
                return r;
        qualify(&rd, me, ret->name, sizeof(ret->name));
        /* The path: a String, or an Array [path, realpath]. */
        uint64_t flags, path = pathobj;
        if (type_of(&rd, pathobj, &flags) == l->t_array && array_at(&rd, pathobj, 0, &path) < 0)
                return -EFAULT;
        if (read_string(&rd, path, ret->filename, sizeof(ret->filename)) < 0)
                ret->filename[0] = 0;
        ret->first_line = (first & 1) ? (int)((int64_t)first >> 1) : 0; /* a Fixnum */
        if (read_lines(&rd, body, ret) < 0) {
                fp_ruby_code_free(ret);
                ret->n_lines = 0;
        }
        return 0;
}

/* ---- in a process ---- */

static void inspect(Elf *elf, void *facts)
{
        fp_ruby_inspect(elf, facts);
}

static bool is_runtime(const void *facts)
{
        return ((const struct fp_ruby_facts *)facts)->vm_ptr != 0;
}

const struct fp_sym_inspector fp_ruby_inspector = {"ruby", sizeof(struct fp_ruby_facts), inspect,
                                                   is_runtime, NULL};

static int judge(const void *facts, const char *path, void *bin, char *why, size_t why_len)
{
        return fp_ruby_judge(facts, path, bin, why, why_len);
}

int fp_ruby_find(struct fp_maps *m, const struct fp_ruby_binary **ret_bin, uint64_t *ret_bias,
                 const char **ret_why)
{
        return fp_rt_find(m, &fp_ruby_inspector, judge, sizeof(**ret_bin), (const void **)ret_bin,
                          ret_bias, ret_why);
}
