/* SPDX-License-Identifier: MIT */
/*
 * CPython binaries and their layouts: see python.h. The tables below are
 * facts of CPython's headers (Include/cpython/pystate.h, frameobject.h,
 * code.h, unicodeobject.h, Include/internal/pycore_frame.h,
 * pycore_interp.h, pycore_runtime.h) for x86-64, one per minor version.
 */
#include "python.h"

#include "escape.h"
#include "rtelf.h"
#include "rtfind.h"
#include "maps.h"
#include "symbols.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE (-1)

/*
 * 3.8 to 3.10 share their layouts but for f_lasti's place (and meaning:
 * 3.10 counts code units): frames are PyFrameObjects, one evaluation each.
 */
#define FRAME_OBJECT_LAYOUT(m, lasti)                                                              \
        {                                                                                          \
                .minor = (m), .runtime_interp_head = 32, .interp_tstate_head = 8,                  \
                .tstate_next = 8, .tstate_thread_id = 176, .tstate_native_thread_id = NONE,        \
                .tstate_frame = 24, .cframe_current_frame = NONE, .frame_previous = 24,            \
                .frame_code = 32, .frame_instr = (lasti), .frame_owner = NONE,                     \
                .frame_is_entry = NONE, .code_filename = 104, .code_name = 112,                    \
                .code_qualname = NONE, .code_firstlineno = 40, .code_linetable = 120,              \
                .code_adaptive = NONE, .unicode_length = 16, .unicode_state = 32,                  \
                .unicode_ascii_data = 48, .unicode_compact_data = 72, .bytes_size = 16,            \
                .bytes_data = 32, .object_type = 8                                                 \
        }

static const struct fp_py_layout layouts[] = {
    FRAME_OBJECT_LAYOUT(8, 104),
    FRAME_OBJECT_LAYOUT(9, 104),
    FRAME_OBJECT_LAYOUT(10, 96),
    {.minor = 11,
     .runtime_interp_head = 40,
     .interp_tstate_head = 16,
     .tstate_next = 8,
     .tstate_thread_id = 152,
     .tstate_native_thread_id = 160,
     .tstate_frame = 56,
     .cframe_current_frame = 8,
     .frame_previous = 48,
     .frame_code = 32,
     .frame_instr = 56,
     .frame_owner = 69,
     .frame_is_entry = 68,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_firstlineno = 72,
     .code_linetable = 136,
     .code_adaptive = 184,
     .unicode_length = 16,
     .unicode_state = 32,
     .unicode_ascii_data = 48,
     .unicode_compact_data = 72,
     .bytes_size = 16,
     .bytes_data = 32,
     .object_type = 8},
    {.minor = 12,
     .runtime_interp_head = 40,
     .interp_tstate_head = 72,
     .tstate_next = 8,
     .tstate_thread_id = 136,
     .tstate_native_thread_id = 144,
     .tstate_frame = 56,
     .cframe_current_frame = 0,
     .frame_previous = 8,
     .frame_code = 0,
     .frame_instr = 56,
     .frame_owner = 70,
     .frame_is_entry = NONE,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_firstlineno = 68,
     .code_linetable = 136,
     .code_adaptive = 192,
     .unicode_length = 16,
     .unicode_state = 32,
     .unicode_ascii_data = 40,
     .unicode_compact_data = 56,
     .bytes_size = 16,
     .bytes_data = 32,
     .object_type = 8},
    {.minor = 13,
     .runtime_interp_head = 632,
     .interp_tstate_head = 7344,
     .tstate_next = 8,
     .tstate_thread_id = 152,
     .tstate_native_thread_id = 160,
     .tstate_frame = 72,
     .cframe_current_frame = NONE,
     .frame_previous = 8,
     .frame_code = 0,
     .frame_instr = 56,
     .frame_owner = 70,
     .frame_is_entry = NONE,
     .code_filename = 112,
     .code_name = 120,
     .code_qualname = 128,
     .code_firstlineno = 68,
     .code_linetable = 136,
     .code_adaptive = 200,
     .unicode_length = 16,
     .unicode_state = 32,
     .unicode_ascii_data = 40,
     .unicode_compact_data = 56,
     .bytes_size = 16,
     .bytes_data = 32,
     .object_type = 8},
};

const struct fp_py_layout *fp_py_layout_of(int minor)
{
        for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
                if (layouts[i].minor == minor)
                        return &layouts[i];
        return NULL;
}

/*
 * The defined symbols of elf's .symtab and .dynsym named names[i], in one
 * pass over them: found[i] says whether, ret[i] holds the first such.
 */
struct find {
        const char *const *names;
        size_t n_names;
        GElf_Sym *ret;
        bool *found;
};

static void find_one(void *userdata, const char *name, const GElf_Sym *s)
{
        struct find *f = userdata;

        for (size_t k = 0; k < f->n_names; k++)
                if (!f->found[k] && strcmp(name, f->names[k]) == 0) {
                        f->ret[k] = *s;
                        f->found[k] = true;
                }
}

static void find_symbols(Elf *elf, const char *const *names, size_t n_names, GElf_Sym *ret,
                         bool *found)
{
        struct find f = {names, n_names, ret, found};

        memset(found, 0, n_names * sizeof(*found));
        fp_rt_elf_symbols(elf, find_one, &f);
}

/* The minor version in a file name: python3.X or libpython3.X..., else -1. */
static int minor_of_name(const char *path)
{
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (strncmp(base, "lib", 3) == 0)
                base += 3;
        if (strncmp(base, "python3.", 8) != 0)
                return -1;
        char *end;
        long m = strtol(base + 8, &end, 10);
        if (end == base + 8 || m < 0 || m > 99 ||
            (*end && *end != '.' && *end != 'm' && *end != 'd'))
                return -1;
        return (int)m;
}

/* Whether elf's dynamic section needs a libpython3.X shared object. */
static bool needs_libpython(Elf *elf)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
                        continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
                for (size_t i = 0; d && i < n; i++) {
                        GElf_Dyn dyn;
                        const char *name;
                        if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag != DT_NEEDED)
                                continue;
                        name = elf_strptr(elf, sh.sh_link, dyn.d_un.d_val);
                        if (name && strncmp(name, "libpython", 9) == 0)
                                return true;
                }
        }
        return false;
}

void fp_py_inspect(Elf *elf, struct fp_py_facts *ret)
{
        enum { RUNTIME, VERSION, EVAL, EVAL_COLD, INITIALIZE, N };
        static const char *const names[N] = {"_PyRuntime", "Py_Version", "_PyEval_EvalFrameDefault",
                                             "_PyEval_EvalFrameDefault.cold", "Py_Initialize"};
        GElf_Sym s[N];
        bool found[N];

        memset(ret, 0, sizeof(*ret));
        find_symbols(elf, names, N, s, found);
        if (found[RUNTIME])
                ret->runtime = s[RUNTIME].st_value;
        if (found[VERSION] && !fp_rt_elf_read(elf, s[VERSION].st_value, &ret->version, 8))
                ret->version = 0;
        if (found[EVAL]) {
                ret->eval_start = s[EVAL].st_value;
                ret->eval_end = s[EVAL].st_value + (s[EVAL].st_size ? s[EVAL].st_size : 1);
        }
        if (found[EVAL_COLD]) {
                ret->eval_cold_start = s[EVAL_COLD].st_value;
                ret->eval_cold_end =
                    s[EVAL_COLD].st_value + (s[EVAL_COLD].st_size ? s[EVAL_COLD].st_size : 1);
        }
        ret->launcher = needs_libpython(elf);
        ret->old_python = !ret->runtime && found[INITIALIZE];
}

int fp_py_judge(const struct fp_py_facts *f, const char *path, struct fp_py_binary *ret, char *why,
                size_t why_len)
{
        int name_minor = minor_of_name(path);

        memset(ret, 0, sizeof(*ret));
        if (!f->runtime) {
                /* No Python, or a launcher whose libpython is the interpreter. */
                if (name_minor < 0 || f->launcher)
                        return 0;
                /* Before 3.7 there was no _PyRuntime: an old Python, or no Python at all. */
                if (name_minor < FP_PY_MINOR_MIN && f->old_python)
                        snprintf(why, why_len,
                                 "%s is Python 3.%d, which fleetprof does not read (3.%d to 3.%d)",
                                 path, name_minor, FP_PY_MINOR_MIN, FP_PY_MINOR_MAX);
                else
                        snprintf(why, why_len, "%s is named like Python 3.%d but has no _PyRuntime",
                                 path, name_minor);
                return -EPROTONOSUPPORT;
        }
        ret->runtime = f->runtime;
        if (f->version >> 24 == 3) {
                ret->major = 3;
                ret->minor = (int)(f->version >> 16 & 0xff);
                ret->micro = (int)(f->version >> 8 & 0xff);
        } else if (name_minor >= 0) {
                ret->major = 3;
                ret->minor = name_minor;
                ret->micro = -1;
        } else {
                snprintf(why, why_len,
                         "%s has Python's runtime but no version (no Py_Version, and its name "
                         "has none)",
                         path);
                return -EPROTONOSUPPORT;
        }
        ret->layout = fp_py_layout_of(ret->minor);
        if (!ret->layout) {
                snprintf(why, why_len,
                         "%s is Python 3.%d, which fleetprof does not read (3.%d to 3.%d)", path,
                         ret->minor, FP_PY_MINOR_MIN, FP_PY_MINOR_MAX);
                return -EPROTONOSUPPORT;
        }
        ret->eval_start = f->eval_start;
        ret->eval_end = f->eval_end;
        ret->eval_cold_start = f->eval_cold_start;
        ret->eval_cold_end = f->eval_cold_end;
        return 1;
}

int fp_py_detect(const char *path, Elf *elf, struct fp_py_binary *ret, char *why, size_t why_len)
{
        struct fp_py_facts f;

        fp_py_inspect(elf, &f);
        return fp_py_judge(&f, path, ret, why, why_len);
}

/* ---- a live interpreter ---- */

static int peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
        return fp_rt_peek(pid, addr, buf, len);
}

int fp_py_threads(pid_t pid, const struct fp_py_binary *b, uint64_t bias, fp_py_thread_fn fn,
                  void *userdata)
{
        const struct fp_py_layout *l = b->layout;
        uint64_t interp, ts, pthread_id, native = 0;
        int n = 0, r;

        if (!l)
                return -EINVAL;
        if ((r = peek(pid, b->runtime + bias + (uint64_t)l->runtime_interp_head, &interp, 8)) < 0)
                return r;
        if (!interp)
                return -EFAULT; /* not initialised, or not this interpreter */
        if ((r = peek(pid, interp + (uint64_t)l->interp_tstate_head, &ts, 8)) < 0)
                return r;
        while (ts && n < 4096) {
                if ((r = peek(pid, ts + (uint64_t)l->tstate_thread_id, &pthread_id, 8)) < 0)
                        return r;
                if (l->tstate_native_thread_id != NONE &&
                    (r = peek(pid, ts + (uint64_t)l->tstate_native_thread_id, &native, 8)) < 0)
                        return r;
                if (fn && (r = fn(userdata, ts, pthread_id, (pid_t)native)) < 0)
                        return r;
                n++;
                if ((r = peek(pid, ts + (uint64_t)l->tstate_next, &ts, 8)) < 0)
                        return r;
        }
        return n;
}

/* ---- code objects ---- */

/* A str object's text as UTF-8 into out (cut at size - 1 bytes): 0 or -EFAULT. */
static int read_str(pid_t pid, const struct fp_py_layout *l, uint64_t obj, char *out, size_t size)
{
        uint64_t len;
        uint32_t state;
        int r;

        out[0] = '\0';
        if (!obj)
                return -EFAULT;
        if ((r = peek(pid, obj + (uint64_t)l->unicode_length, &len, 8)) < 0 ||
            (r = peek(pid, obj + (uint64_t)l->unicode_state, &state, 4)) < 0)
                return r;
        /* state: interned (2 bits), kind (3), compact (1), ascii (1). */
        unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
        if (!compact || (kind != 1 && kind != 2 && kind != 4) || len > 1 << 20)
                return -EFAULT;
        uint64_t data = obj + (uint64_t)(ascii ? l->unicode_ascii_data : l->unicode_compact_data);
        size_t n = 0;
        for (uint64_t i = 0; i < len && n + 5 < size;) {
                uint8_t buf[256];
                size_t chunk =
                    (size_t)((len - i) * kind < sizeof(buf) ? (len - i) * kind : sizeof(buf));
                chunk -= chunk % kind;
                if ((r = peek(pid, data + i * kind, buf, chunk)) < 0)
                        return r;
                for (size_t k = 0; k < chunk && n + 5 < size; k += kind, i++) {
                        uint32_t c = kind == 1 ? buf[k]
                                     : kind == 2
                                         ? (uint32_t)(buf[k] | buf[k + 1] << 8)
                                         : (uint32_t)(buf[k] | buf[k + 1] << 8 | buf[k + 2] << 16 |
                                                      (uint32_t)buf[k + 3] << 24);
                        if (c >= 0x110000)
                                return -EFAULT;
                        n += fp_utf8_put(out + n, c); /* (a lone surrogate as U+FFFD) */
                        if (c == 0)
                                return -EFAULT; /* no name holds a NUL */
                }
        }
        out[n] = '\0';
        return 0;
}

int fp_py_code_read(pid_t pid, const struct fp_py_layout *l, uint64_t code, struct fp_py_code *ret)
{
        uint64_t name, file, table, size;
        int32_t first;
        int r;

        memset(ret, 0, sizeof(*ret));
        if ((r = peek(pid,
                      code + (uint64_t)(l->code_qualname >= 0 ? l->code_qualname : l->code_name),
                      &name, 8)) < 0 ||
            (r = peek(pid, code + (uint64_t)l->code_filename, &file, 8)) < 0 ||
            (r = peek(pid, code + (uint64_t)l->code_firstlineno, &first, 4)) < 0 ||
            (r = peek(pid, code + (uint64_t)l->code_linetable, &table, 8)) < 0)
                return r;
        if ((r = read_str(pid, l, name, ret->name, sizeof(ret->name))) < 0 ||
            (r = read_str(pid, l, file, ret->filename, sizeof(ret->filename))) < 0)
                return r;
        ret->firstlineno = first;
        ret->name_addr = name;
        if (!table || (r = peek(pid, table + (uint64_t)l->bytes_size, &size, 8)) < 0)
                return table ? r : -EFAULT;
        if (size > FP_PY_LINETABLE_MAX)
                return -EFAULT;
        ret->linetable = malloc(size ? size : 1);
        if (!ret->linetable)
                return -ENOMEM;
        ret->linetable_len = size;
        if (size && (r = peek(pid, table + (uint64_t)l->bytes_data, ret->linetable, size)) < 0) {
                fp_py_code_free(ret);
                return r;
        }
        return 0;
}

void fp_py_code_free(struct fp_py_code *c)
{
        free(c->linetable);
        c->linetable = NULL;
        c->linetable_len = 0;
}

uint64_t fp_py_instr_offset(const struct fp_py_layout *l, uint64_t code, uint64_t instr)
{
        int64_t off;

        if (l->minor <= 9)
                off = (int32_t)instr;
        else if (l->minor == 10)
                off = (int64_t)(int32_t)instr * 2;
        else
                off = (int64_t)(instr - (code + (uint64_t)l->code_adaptive));
        /* 3.11 and 3.12 point at the instruction before the next: the one running. */
        return off < 0 || off > 1 << 24 ? UINT64_MAX : (uint64_t)off;
}

/* The 3.11+ location table's variable-length numbers: 6 bits a byte, bit 6 for more. */
static bool varint(const uint8_t *p, size_t n, size_t *at, uint64_t *ret)
{
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b;

        do {
                if (*at >= n || shift > 60)
                        return false;
                b = p[(*at)++];
                v |= (uint64_t)(b & 0x3f) << shift;
                shift += 6;
        } while (b & 0x40);
        *ret = v;
        return true;
}

static bool svarint(const uint8_t *p, size_t n, size_t *at, int64_t *ret)
{
        uint64_t v;

        if (!varint(p, n, at, &v))
                return false;
        *ret = v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
        return true;
}

int fp_py_line(const struct fp_py_layout *l, const struct fp_py_code *c, uint64_t off)
{
        const uint8_t *p = c->linetable;
        size_t n = c->linetable_len, at = 0;
        int64_t line = c->firstlineno;
        uint64_t addr = 0;

        if (off == UINT64_MAX)
                return c->firstlineno;
        if (l->minor <= 9) {
                /* (address increment, signed line increment) pairs; a pair past off ends it. */
                for (; at + 1 < n; at += 2) {
                        addr += p[at];
                        if (addr > off)
                                break;
                        line += (int8_t)p[at + 1];
                }
                return line > 0 ? (int)line : 0;
        }
        if (l->minor == 10) {
                /* (bytes covered, signed line delta; -128: no line) pairs. */
                for (; at + 1 < n; at += 2) {
                        uint64_t end = addr + p[at];
                        bool none = (int8_t)p[at + 1] == -128;
                        if (!none)
                                line += (int8_t)p[at + 1];
                        if (off >= addr && off < end)
                                return none || line <= 0 ? 0 : (int)line;
                        addr = end;
                }
                return 0;
        }
        /* 3.11+: entries of (1 code:4 length-1:3) and what the code says follows. */
        while (at < n) {
                uint8_t b = p[at++];
                if (!(b & 0x80))
                        return 0; /* not at an entry's start: a damaged table */
                unsigned code = b >> 3 & 15;
                uint64_t end = addr + 2 * (uint64_t)((b & 7) + 1), skip;
                int64_t delta = 0;
                bool none = false;
                if (code <= 9) {
                        at++; /* column */
                } else if (code <= 12) {
                        delta = code - 10;
                        at += 2; /* columns */
                } else if (code == 13) {
                        if (!svarint(p, n, &at, &delta))
                                return 0;
                } else if (code == 14) {
                        if (!svarint(p, n, &at, &delta) || !varint(p, n, &at, &skip) ||
                            !varint(p, n, &at, &skip) || !varint(p, n, &at, &skip))
                                return 0;
                } else {
                        none = true;
                }
                line += delta;
                if (off >= addr && off < end)
                        return none || line <= 0 ? 0 : (int)line;
                addr = end;
        }
        return 0;
}

/* ---- in a process ---- */

static void inspect(Elf *elf, void *facts)
{
        fp_py_inspect(elf, facts);
}

static bool is_runtime(const void *facts)
{
        return ((const struct fp_py_facts *)facts)->runtime != 0;
}

const struct fp_sym_inspector fp_py_inspector = {"python", sizeof(struct fp_py_facts), inspect,
                                                 is_runtime, NULL};

static int judge(const void *facts, const char *path, void *bin, char *why, size_t why_len)
{
        return fp_py_judge(facts, path, bin, why, why_len);
}

int fp_py_find(struct fp_maps *m, const struct fp_py_binary **ret_bin, uint64_t *ret_bias,
               const char **ret_why)
{
        return fp_rt_find(m, &fp_py_inspector, judge, sizeof(**ret_bin), (const void **)ret_bin,
                          ret_bias, ret_why);
}

void fp_py_read_files(struct fp_maps *m)
{
        fp_maps_read_files_named(m, "python");
}

size_t fp_py_n_files(const struct fp_symcache *c, size_t *ret_refused)
{
        return fp_symcache_n_runtime(c, fp_sym_inspector_slot(&fp_py_inspector), ret_refused);
}
