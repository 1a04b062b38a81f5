/* SPDX-License-Identifier: MIT */
/*
 * PHP interpreters: recognised in a file, their layouts, their functions'
 * names read from a process (php.h).
 */
#include "php.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtelf.h"
#include "rtfind.h"
#include "symbols.h"

/* ---- layouts ---- */

/* PHP 8.2 (Zend Engine 4.2), from its Zend/zend_globals.h, zend_compile.h, zend_types.h. */
static const struct fp_php_layout php82 = {
    .major = 8,
    .minor = 2,
    .eg_current_execute_data = 488,
    .ex_opline = 0,
    .ex_func = 24,
    .ex_call_info = 40, /* This (32) .u1.type_info (8) */
    .ex_prev = 48,
    .func_type = 0,
    .func_flags = 4,
    .func_name = 8,
    .func_scope = 16,
    .op_array_filename = 152,
    .op_array_line_start = 160,
    .op_lineno = 24,
    .string_len = 16,
    .string_val = 24,
    .class_name = 8,
    .call_top = 1u << 17,
    .acc_closure = 1u << 22,
    .internal_function = 1,
    .user_function = 2,
    .eval_code = 4,
};

const struct fp_php_layout *fp_php_layout_of(int major, int minor)
{
        if (major == 8 && minor == 2)
                return &php82;
        return NULL;
}

/* ---- in a file ---- */

struct find {
        GElf_Sym eg, exec;
        bool have_eg, have_exec, zts;
};

static void find_one(void *userdata, const char *name, const GElf_Sym *s)
{
        struct find *f = userdata;

        if (strcmp(name, "executor_globals") == 0) {
                f->eg = *s;
                f->have_eg = true;
        } else if (strcmp(name, "execute_ex") == 0) {
                f->exec = *s;
                f->have_exec = true;
        } else if (strcmp(name, "executor_globals_offset") == 0) {
                f->zts = true;
        }
}

/* The version in the file's "X-Powered-By: PHP/x.y.z" (its read-only data): false when none. */
static bool version_of(Elf *elf, int *major, int *minor, int *micro)
{
        static const char tag[] = "X-Powered-By: PHP/";
        Elf_Scn *scn = NULL;
        size_t shstrndx;
        GElf_Shdr sh;

        if (elf_getshdrstrndx(elf, &shstrndx) != 0)
                return false;
        while ((scn = elf_nextscn(elf, scn))) {
                const char *name;
                Elf_Data *d;
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(name, ".rodata"))
                        continue;
                if (!(d = elf_getdata(scn, NULL)) || !d->d_buf)
                        return false;
                const char *at = memmem(d->d_buf, d->d_size, tag, sizeof(tag) - 1);
                if (!at)
                        return false;
                size_t left = d->d_size - (size_t)(at - (const char *)d->d_buf) - (sizeof(tag) - 1);
                char v[32];
                size_t n = left < sizeof(v) - 1 ? left : sizeof(v) - 1;
                memcpy(v, at + sizeof(tag) - 1, n);
                v[n] = 0;
                return sscanf(v, "%d.%d.%d", major, minor, micro) == 3;
        }
        return false;
}

void fp_php_inspect(Elf *elf, struct fp_php_facts *ret)
{
        struct find f = {0};

        memset(ret, 0, sizeof(*ret));
        ret->major = ret->minor = ret->micro = -1;
        fp_rt_elf_symbols(elf, find_one, &f);
        ret->zts = f.zts && !f.have_eg;
        if (!f.have_exec || !(f.have_eg || f.zts))
                return;
        if (f.have_eg)
                ret->executor_globals = f.eg.st_value;
        ret->eval_start = f.exec.st_value;
        ret->eval_end = f.exec.st_value + (f.exec.st_size ? f.exec.st_size : 1);
        if (!version_of(elf, &ret->major, &ret->minor, &ret->micro))
                ret->major = ret->minor = ret->micro = -1;
}

int fp_php_judge(const struct fp_php_facts *f, const char *path, struct fp_php_binary *ret,
                 char *why, size_t why_len)
{
        memset(ret, 0, sizeof(*ret));
        if (!f->eval_start)
                return 0;
        if (f->zts) {
                snprintf(why, why_len,
                         "%s is a thread-safe (ZTS) PHP build, whose globals are per thread: not "
                         "read",
                         path);
                return -EPROTONOSUPPORT;
        }
        if (f->major < 0) {
                snprintf(why, why_len, "%s has PHP's engine but no version string", path);
                return -EPROTONOSUPPORT;
        }
        ret->layout = fp_php_layout_of(f->major, f->minor);
        if (!ret->layout) {
                snprintf(why, why_len, "%s is PHP %d.%d, which fleetprof does not read (8.2)", path,
                         f->major, f->minor);
                return -EPROTONOSUPPORT;
        }
        ret->major = f->major;
        ret->minor = f->minor;
        ret->micro = f->micro;
        ret->executor_globals = f->executor_globals;
        ret->eval_start = f->eval_start;
        ret->eval_end = f->eval_end;
        return 1;
}

/* ---- functions ---- */

/* A zend_string's bytes at addr into buf (cut to its size): 0 or -errno. */
static int read_string(pid_t pid, const struct fp_php_layout *l, uint64_t addr, char *buf,
                       size_t size)
{
        uint64_t len;
        int r;

        buf[0] = 0;
        if ((r = fp_rt_peek(pid, addr + (uint64_t)l->string_len, &len, 8)) < 0)
                return r;
        if (len > 1 << 20)
                return -EFAULT; /* no name is a megabyte long: not a string */
        size_t n = len < size - 1 ? (size_t)len : size - 1;
        if (n && (r = fp_rt_peek(pid, addr + (uint64_t)l->string_val, buf, n)) < 0)
                return r;
        buf[n] = 0;
        /* A name is text: a NUL inside says this is not a name. */
        if (strlen(buf) != n)
                return -EFAULT;
        return 0;
}

int fp_php_function_read(pid_t pid, const struct fp_php_layout *l, uint64_t func,
                         struct fp_php_function *ret)
{
        uint64_t name = 0, scope = 0, file = 0, class_name;
        uint32_t flags = 0;
        uint8_t type = 0;
        char cls[FP_PHP_NAME_MAX], fn[FP_PHP_NAME_MAX];
        int32_t start = 0;
        int r;

        memset(ret, 0, sizeof(*ret));
        if ((r = fp_rt_peek(pid, func + (uint64_t)l->func_type, &type, 1)) < 0 ||
            (r = fp_rt_peek(pid, func + (uint64_t)l->func_flags, &flags, 4)) < 0 ||
            (r = fp_rt_peek(pid, func + (uint64_t)l->func_name, &name, 8)) < 0 ||
            (r = fp_rt_peek(pid, func + (uint64_t)l->func_scope, &scope, 8)) < 0)
                return r;
        if (type != l->internal_function && type != l->user_function && type != l->eval_code)
                return -EFAULT;
        ret->internal = type == l->internal_function;
        if (!ret->internal &&
            ((r = fp_rt_peek(pid, func + (uint64_t)l->op_array_filename, &file, 8)) < 0 ||
             (r = fp_rt_peek(pid, func + (uint64_t)l->op_array_line_start, &start, 4)) < 0 ||
             (file && (r = read_string(pid, l, file, ret->filename, sizeof(ret->filename))) < 0)))
                return r;
        fn[0] = cls[0] = 0;
        if (name && (r = read_string(pid, l, name, fn, sizeof(fn))) < 0)
                return r;
        if (scope && (r = fp_rt_peek(pid, scope + (uint64_t)l->class_name, &class_name, 8)) == 0)
                r = read_string(pid, l, class_name, cls, sizeof(cls));
        if (r < 0)
                return r;
        /* As PHP's own backtraces write them. */
        if (type == l->eval_code)
                snprintf(fn, sizeof(fn), "{eval}");
        else if (!name)
                snprintf(fn, sizeof(fn), "{main}");
        else if (flags & l->acc_closure)
                snprintf(fn, sizeof(fn), "{closure}");
        if (cls[0] && name)
                snprintf(ret->name, sizeof(ret->name), "%s::%s", cls, fn);
        else
                snprintf(ret->name, sizeof(ret->name), "%s", fn);
        ret->line_start = start > 0 ? start : 0;
        ret->name_addr = name;
        ret->file_addr = file;
        return 0;
}

uint32_t fp_php_stamp(const struct fp_php_function *f)
{
        uint64_t a = f->name_addr ^ f->file_addr;
        return (uint32_t)(a >> 4) ^ ((uint32_t)f->line_start * 0x9e3779b1u);
}

/* ---- in a process ---- */

static void inspect(Elf *elf, void *facts)
{
        fp_php_inspect(elf, facts);
}

static bool is_runtime(const void *facts)
{
        return ((const struct fp_php_facts *)facts)->eval_start != 0;
}

const struct fp_sym_inspector fp_php_inspector = {"php", sizeof(struct fp_php_facts), inspect,
                                                  is_runtime, NULL};

static int judge(const void *facts, const char *path, void *bin, char *why, size_t why_len)
{
        return fp_php_judge(facts, path, bin, why, why_len);
}

int fp_php_find(struct fp_maps *m, const struct fp_php_binary **ret_bin, uint64_t *ret_bias,
                const char **ret_why)
{
        return fp_rt_find(m, &fp_php_inspector, judge, sizeof(**ret_bin), (const void **)ret_bin,
                          ret_bias, ret_why);
}

size_t fp_php_n_files(const struct fp_symcache *c, size_t *ret_refused)
{
        return fp_symcache_n_runtime(c, fp_sym_inspector_slot(&fp_php_inspector), ret_refused);
}
