/* SPDX-License-Identifier: MIT */
/*
 * CPython binaries and their layouts: see python.h. The tables below are
 * facts of CPython's headers (Include/cpython/pystate.h, frameobject.h,
 * code.h, unicodeobject.h, Include/internal/pycore_frame.h,
 * pycore_interp.h, pycore_runtime.h) for x86-64, one per minor version.
 */
#include "python.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define NONE (-1)

static const struct fp_py_layout layouts[] = {
    {.minor = 8,
     .runtime_interp_head = 32,
     .interp_tstate_head = 8,
     .tstate_next = 8,
     .tstate_thread_id = 176,
     .tstate_native_thread_id = NONE,
     .tstate_frame = 24,
     .cframe_current_frame = NONE,
     .frame_previous = 24,
     .frame_code = 32,
     .frame_instr = 104,
     .frame_owner = NONE,
     .frame_is_entry = NONE,
     .code_filename = 104,
     .code_name = 112,
     .code_qualname = NONE,
     .code_firstlineno = 40,
     .code_linetable = 120,
     .code_adaptive = NONE,
     .unicode_length = 16,
     .unicode_state = 32,
     .unicode_ascii_data = 48,
     .unicode_compact_data = 72,
     .bytes_size = 16,
     .bytes_data = 32,
     .object_type = 8},
    {.minor = 9,
     .runtime_interp_head = 32,
     .interp_tstate_head = 8,
     .tstate_next = 8,
     .tstate_thread_id = 176,
     .tstate_native_thread_id = NONE,
     .tstate_frame = 24,
     .cframe_current_frame = NONE,
     .frame_previous = 24,
     .frame_code = 32,
     .frame_instr = 104,
     .frame_owner = NONE,
     .frame_is_entry = NONE,
     .code_filename = 104,
     .code_name = 112,
     .code_qualname = NONE,
     .code_firstlineno = 40,
     .code_linetable = 120,
     .code_adaptive = NONE,
     .unicode_length = 16,
     .unicode_state = 32,
     .unicode_ascii_data = 48,
     .unicode_compact_data = 72,
     .bytes_size = 16,
     .bytes_data = 32,
     .object_type = 8},
    {.minor = 10,
     .runtime_interp_head = 32,
     .interp_tstate_head = 8,
     .tstate_next = 8,
     .tstate_thread_id = 176,
     .tstate_native_thread_id = NONE,
     .tstate_frame = 24,
     .cframe_current_frame = NONE,
     .frame_previous = 24,
     .frame_code = 32,
     .frame_instr = 96,
     .frame_owner = NONE,
     .frame_is_entry = NONE,
     .code_filename = 104,
     .code_name = 112,
     .code_qualname = NONE,
     .code_firstlineno = 40,
     .code_linetable = 120,
     .code_adaptive = NONE,
     .unicode_length = 16,
     .unicode_state = 32,
     .unicode_ascii_data = 48,
     .unicode_compact_data = 72,
     .bytes_size = 16,
     .bytes_data = 32,
     .object_type = 8},
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

/* A defined symbol of elf's .symtab or .dynsym by name: its value and size. */
static bool find_symbol(Elf *elf, const char *name, GElf_Sym *ret)
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
                        const char *sn;
                        if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
                                continue;
                        sn = elf_strptr(elf, sh.sh_link, s.st_name);
                        if (sn && strcmp(sn, name) == 0) {
                                *ret = s;
                                return true;
                        }
                }
        }
        return false;
}

/* The 8 bytes at link-time address vaddr, from the section holding them. */
static bool read_u64(Elf *elf, uint64_t vaddr, uint64_t *ret)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                    !(sh.sh_flags & SHF_ALLOC))
                        continue;
                if (vaddr < sh.sh_addr || vaddr + 8 > sh.sh_addr + sh.sh_size)
                        continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                uint64_t off = vaddr - sh.sh_addr;
                if (!d || !d->d_buf || off + 8 > d->d_size)
                        return false;
                memcpy(ret, (const char *)d->d_buf + off, 8);
                return true;
        }
        return false;
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
        GElf_Sym s;

        memset(ret, 0, sizeof(*ret));
        if (find_symbol(elf, "_PyRuntime", &s))
                ret->runtime = s.st_value;
        if (find_symbol(elf, "Py_Version", &s) && !read_u64(elf, s.st_value, &ret->version))
                ret->version = 0;
        if (find_symbol(elf, "_PyEval_EvalFrameDefault", &s)) {
                ret->eval_start = s.st_value;
                ret->eval_end = s.st_value + (s.st_size ? s.st_size : 1);
        }
        if (find_symbol(elf, "_PyEval_EvalFrameDefault.cold", &s)) {
                ret->eval_cold_start = s.st_value;
                ret->eval_cold_end = s.st_value + (s.st_size ? s.st_size : 1);
        }
        ret->launcher = needs_libpython(elf);
        ret->old_python = !ret->runtime && find_symbol(elf, "Py_Initialize", &s);
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
        struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

        if (n == (ssize_t)len)
                return 0;
        return n < 0 && errno != EFAULT ? -errno : -EFAULT;
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
