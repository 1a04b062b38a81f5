/* SPDX-License-Identifier: MIT */
/*
 * Interpreted Java methods named from a HotSpot JVM's memory; see hotspot.h.
 */
#include "hotspot.h"
#include "elfread.h"
#include "util.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define TABLE_MAX_ENTRIES 65536 /* of VMStructs or VMTypes read at most */
#define TABLE_CHUNK       64    /* entries read at once */
#define ENTRY_MAX_STRIDE  256
#define TABLE_NAME_MAX    80 /* a type or field name read */

/* What is read of the layouts: a field's offset, or a type's size. */
enum {
        F_METHOD_CONST,    /* Method::_constMethod */
        F_CONST_CONSTANTS, /* ConstMethod::_constants */
        F_CONST_NAME,      /* ConstMethod::_name_index */
        F_CONST_SIGNATURE, /* ConstMethod::_signature_index */
        F_POOL_HOLDER,     /* ConstantPool::_pool_holder */
        F_POOL_LENGTH,     /* ConstantPool::_length */
        F_KLASS_NAME,      /* Klass::_name */
        F_SYMBOL_LENGTH,   /* Symbol::_length */
        F_SYMBOL_BODY,     /* Symbol::_body */
        N_FIELDS
};
static const char *const fields[N_FIELDS][2] = {{"Method", "_constMethod"},
                                                {"ConstMethod", "_constants"},
                                                {"ConstMethod", "_name_index"},
                                                {"ConstMethod", "_signature_index"},
                                                {"ConstantPool", "_pool_holder"},
                                                {"ConstantPool", "_length"},
                                                {"Klass", "_name"},
                                                {"Symbol", "_length"},
                                                {"Symbol", "_body"}};

struct method {
        uint64_t method; /* 0: a free slot */
        char *name;      /* NULL: it gave none */
};

struct fp_hotspot {
        pid_t pid;
        uint64_t off[N_FIELDS];
        unsigned found;     /* the fields found: 1 << F_... */
        uint64_t pool_size; /* sizeof(ConstantPool): its entries follow it */
        struct method *slots;
        size_t n_slots, n_used, n_named, n_failed;
};

/* len bytes at addr in the JVM; false when they cannot all be read. */
static bool peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
        struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};

        return addr && process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

static bool peek_u64(pid_t pid, uint64_t addr, uint64_t *ret)
{
        return peek(pid, addr, ret, sizeof(*ret));
}

/* A NUL-terminated string at addr (at most len - 1 bytes, read page by page). */
static bool peek_cstr(pid_t pid, uint64_t addr, char *buf, size_t len)
{
        size_t n = 0;

        while (n + 1 < len) {
                size_t chunk = 4096 - ((addr + n) & 4095);
                if (chunk > len - 1 - n)
                        chunk = len - 1 - n;
                if (!peek(pid, addr + n, buf + n, chunk))
                        return false;
                void *nul = memchr(buf + n, 0, chunk);
                if (nul)
                        return true;
                n += chunk;
        }
        buf[len - 1] = 0;
        return false; /* longer than any name wanted */
}

/* The addresses of libjvm.so's exported variables named in names (in the process). */
static int exported(const char *path, uint64_t start, uint64_t pgoff, const char *const *names,
                    size_t n, uint64_t *ret, char *why, size_t len)
{
        int fd = -1, r, found = 0;
        Elf *elf = NULL;
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;
        size_t nph = 0;
        uint64_t bias = 0;
        bool have_bias = false;

        if ((r = fp_elf_open(path, &fd, &elf, NULL)) < 0) {
                snprintf(why, len, "cannot read %s: %s", path, strerror(-r));
                return r;
        }
        /* The load bias: the mapping's start less the address its offset is linked at. */
        if (elf_getphdrnum(elf, &nph) == 0)
                for (size_t i = 0; i < nph && !have_bias; i++) {
                        GElf_Phdr ph;
                        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
                            pgoff >= ph.p_offset && pgoff - ph.p_offset < ph.p_filesz) {
                                bias = start - (ph.p_vaddr + (pgoff - ph.p_offset));
                                have_bias = true;
                        }
                }
        while (have_bias && (scn = elf_nextscn(elf, scn))) {
                Elf_Data *d;
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
                    !(d = elf_getdata(scn, NULL)))
                        continue;
                for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                        GElf_Sym sym;
                        const char *name;
                        if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
                            !(name = elf_strptr(elf, sh.sh_link, sym.st_name)))
                                continue;
                        for (size_t k = 0; k < n; k++)
                                if (!ret[k] && strcmp(name, names[k]) == 0) {
                                        ret[k] = bias + sym.st_value;
                                        found++;
                                }
                }
        }
        elf_end(elf);
        close(fd);
        if (found < (int)n) {
                snprintf(why, len, "%s exports no VMStructs (not a HotSpot libjvm.so?)", path);
                return -ENOENT;
        }
        return 0;
}

/*
 * Walks one of the JVM's tables (VMStructs or VMTypes) at table: entries
 * of stride bytes, ended by one whose type name is NULL; for each, its
 * type name (at name_off), its second string (at second_off, or none) and
 * its number (at value_off) go to fn.
 */
typedef void (*entry_fn)(struct fp_hotspot *h, const char *type, const char *second,
                         uint64_t value);
static int walk(struct fp_hotspot *h, uint64_t table, uint64_t stride, uint64_t name_off,
                uint64_t second_off, bool has_second, uint64_t value_off, entry_fn fn)
{
        uint8_t chunk[TABLE_CHUNK * ENTRY_MAX_STRIDE];

        if (!table || stride < 8 || stride > ENTRY_MAX_STRIDE || name_off > stride - 8 ||
            value_off > stride - 8 || (has_second && second_off > stride - 8))
                return -EINVAL;
        for (uint64_t i = 0; i < TABLE_MAX_ENTRIES; i += TABLE_CHUNK) {
                /* A chunk past the table's last page is read entry by entry. */
                bool whole = peek(h->pid, table + i * stride, chunk, TABLE_CHUNK * stride);
                for (uint64_t k = 0; k < TABLE_CHUNK; k++) {
                        const uint8_t *e = chunk + k * stride;
                        uint64_t type_p, second_p = 0, value;
                        char type[TABLE_NAME_MAX], second[TABLE_NAME_MAX] = "";
                        if (!whole &&
                            !peek(h->pid, table + (i + k) * stride, chunk + k * stride, stride))
                                return -EIO;
                        memcpy(&type_p, e + name_off, 8);
                        if (!type_p)
                                return 0;
                        if (has_second)
                                memcpy(&second_p, e + second_off, 8);
                        memcpy(&value, e + value_off, 8);
                        if (!peek_cstr(h->pid, type_p, type, sizeof(type)) ||
                            (second_p && !peek_cstr(h->pid, second_p, second, sizeof(second))))
                                continue;
                        fn(h, type, second, value);
                }
        }
        return -E2BIG;
}

static void take_field(struct fp_hotspot *h, const char *type, const char *field, uint64_t off)
{
        for (int i = 0; i < N_FIELDS; i++)
                if (strcmp(type, fields[i][0]) == 0 && strcmp(field, fields[i][1]) == 0) {
                        h->off[i] = off;
                        h->found |= 1u << i;
                }
}

static void take_type(struct fp_hotspot *h, const char *type, const char *unused, uint64_t size)
{
        (void)unused;
        if (strcmp(type, "ConstantPool") == 0)
                h->pool_size = size;
}

int fp_hotspot_open(pid_t pid, const char *path, uint64_t start, uint64_t pgoff,
                    struct fp_hotspot **ret, char *why, size_t len)
{
        static const char *const names[] = {
            "gHotSpotVMStructs",
            "gHotSpotVMStructEntryArrayStride",
            "gHotSpotVMStructEntryTypeNameOffset",
            "gHotSpotVMStructEntryFieldNameOffset",
            "gHotSpotVMStructEntryOffsetOffset",
            "gHotSpotVMTypes",
            "gHotSpotVMTypeEntryArrayStride",
            "gHotSpotVMTypeEntryTypeNameOffset",
            "gHotSpotVMTypeEntrySizeOffset",
        };
        enum { N = sizeof(names) / sizeof(names[0]) };
        uint64_t at[N] = {0}, v[N];
        struct fp_hotspot *h;
        int r;

        if ((r = exported(path, start, pgoff, names, N, at, why, len)) < 0)
                return r;
        for (size_t i = 0; i < N; i++)
                if (!peek_u64(pid, at[i], &v[i])) {
                        int e = errno ? errno : EIO;
                        snprintf(why, len, "cannot read the JVM's memory (%s): %s", names[i],
                                 strerror(e));
                        return e == ESRCH ? -ESRCH : -EIO;
                }
        if (!(h = calloc(1, sizeof(*h))))
                return -ENOMEM;
        h->pid = pid;
        r = walk(h, v[0], v[1], v[2], v[3], true, v[4], take_field);
        if (r >= 0)
                r = walk(h, v[5], v[6], v[7], 0, false, v[8], take_type);
        if (r >= 0 && h->found != (1u << N_FIELDS) - 1)
                r = -ENOENT;
        if (r < 0 || !h->pool_size || h->pool_size > 4096) {
                snprintf(why, len, "the JVM's VMStructs do not give what names a method");
                free(h);
                return r < 0 ? r : -ENOENT;
        }
        *ret = h;
        return 0;
}

void fp_hotspot_free(struct fp_hotspot *h)
{
        if (!h)
                return;
        for (size_t i = 0; i < h->n_slots; i++)
                free(h->slots[i].name);
        free(h->slots);
        free(h);
}

/* A Symbol's text (at most len - 1 bytes of printable ASCII or UTF-8). */
static bool symbol(const struct fp_hotspot *h, uint64_t sym, char *out, size_t len)
{
        uint16_t n;

        if (!peek(h->pid, sym + h->off[F_SYMBOL_LENGTH], &n, sizeof(n)) || n == 0 || n >= len ||
            !peek(h->pid, sym + h->off[F_SYMBOL_BODY], out, n))
                return false;
        out[n] = 0;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
                        return false;
        return true;
}

/* Appends s[0..n) to out (len, NUL-terminated), '/' as '.'; false when it does not fit. */
static bool append(char *out, size_t len, const char *s, size_t n)
{
        size_t at = strlen(out);

        if (at + n >= len)
                return false;
        for (size_t i = 0; i < n; i++)
                out[at + i] = s[i] == '/' ? '.' : s[i];
        out[at + n] = 0;
        return true;
}

/* The Java type of the descriptor at *p, appended to out; *p moves past it. */
static bool java_type(const char **p, char *out, size_t len)
{
        static const char codes[] = "BCDFIJSZV";
        static const char *const prims[] = {"byte", "char",  "double",  "float", "int",
                                            "long", "short", "boolean", "void"};
        unsigned dims = 0;
        const char *c;

        while (**p == '[' && dims < 255) {
                dims++;
                (*p)++;
        }
        if (**p == 'L') {
                const char *end = strchr(*p, ';');
                if (!end || end == *p + 1 || !append(out, len, *p + 1, (size_t)(end - *p - 1)))
                        return false;
                *p = end + 1;
        } else if (**p && (c = strchr(codes, **p)) && (**p != 'V' || dims == 0)) {
                const char *prim = prims[c - codes];
                if (!append(out, len, prim, strlen(prim)))
                        return false;
                (*p)++;
        } else {
                return false;
        }
        while (dims--)
                if (!append(out, len, "[]", 2))
                        return false;
        return true;
}

bool fp_hotspot_format(const char *cls, const char *name, const char *sig, char *out, size_t len)
{
        char args[FP_HOTSPOT_MAX_NAME] = "";
        const char *p = sig;

        if (len)
                out[0] = 0;
        if (!len || *p++ != '(')
                return false;
        while (*p && *p != ')') {
                if (*p == 'V' || (args[0] && !append(args, sizeof(args), ", ", 2)) ||
                    !java_type(&p, args, sizeof(args)))
                        return false; /* (a parameter is never void) */
        }
        if (*p++ != ')' || !java_type(&p, out, len) || *p || !append(out, len, " ", 1) ||
            !append(out, len, cls, strlen(cls)) || !append(out, len, ".", 1) ||
            !append(out, len, name, strlen(name)) || !append(out, len, "(", 1) ||
            !append(out, len, args, strlen(args)) || !append(out, len, ")", 1)) {
                out[0] = 0;
                return false;
        }
        return true;
}

/* Reads method's name from the JVM; malloc'd, or NULL. */
static char *read_method(const struct fp_hotspot *h, uint64_t method)
{
        uint64_t cm, cp, holder, kname, name_sym, sig_sym;
        uint16_t ni, si;
        int32_t pool_len;
        char cls[256], name[256], sig[FP_HOTSPOT_MAX_NAME], out[FP_HOTSPOT_MAX_NAME];

        if (!peek_u64(h->pid, method + h->off[F_METHOD_CONST], &cm) ||
            !peek_u64(h->pid, cm + h->off[F_CONST_CONSTANTS], &cp) ||
            !peek(h->pid, cm + h->off[F_CONST_NAME], &ni, sizeof(ni)) ||
            !peek(h->pid, cm + h->off[F_CONST_SIGNATURE], &si, sizeof(si)) ||
            !peek(h->pid, cp + h->off[F_POOL_LENGTH], &pool_len, sizeof(pool_len)) ||
            ni >= pool_len || si >= pool_len ||
            !peek_u64(h->pid, cp + h->off[F_POOL_HOLDER], &holder) ||
            !peek_u64(h->pid, holder + h->off[F_KLASS_NAME], &kname) ||
            !peek_u64(h->pid, cp + h->pool_size + (uint64_t)ni * 8, &name_sym) ||
            !peek_u64(h->pid, cp + h->pool_size + (uint64_t)si * 8, &sig_sym) ||
            !symbol(h, kname, cls, sizeof(cls)) || !symbol(h, name_sym, name, sizeof(name)) ||
            !symbol(h, sig_sym, sig, sizeof(sig)))
                return NULL;
        for (char *c = cls; *c; c++)
                *c = *c == '/' ? '.' : *c;
        if (!fp_hotspot_format(cls, name, sig, out, sizeof(out)))
                return NULL;
        return strdup(out);
}

const char *fp_hotspot_method(struct fp_hotspot *h, uint64_t method)
{
        if (!h || !method)
                return NULL;
        if (h->n_used * 2 >= h->n_slots) {
                if (h->n_used >= FP_HOTSPOT_MAX_METHODS)
                        return NULL;
                size_t n = h->n_slots ? 2 * h->n_slots : 256;
                struct method *slots = calloc(n, sizeof(*slots));
                if (!slots)
                        return NULL;
                for (size_t i = 0; i < h->n_slots; i++) {
                        if (!h->slots[i].method)
                                continue;
                        size_t j =
                            (size_t)fp_fnv1a(FP_FNV1A_SEED, &h->slots[i].method, 8) & (n - 1);
                        while (slots[j].method)
                                j = (j + 1) & (n - 1);
                        slots[j] = h->slots[i];
                }
                free(h->slots);
                h->slots = slots;
                h->n_slots = n;
        }
        size_t j = (size_t)fp_fnv1a(FP_FNV1A_SEED, &method, 8) & (h->n_slots - 1);
        for (; h->slots[j].method; j = (j + 1) & (h->n_slots - 1))
                if (h->slots[j].method == method)
                        return h->slots[j].name;
        h->slots[j] = (struct method){method, read_method(h, method)};
        h->n_used++;
        if (h->slots[j].name)
                h->n_named++;
        else
                h->n_failed++;
        return h->slots[j].name;
}

size_t fp_hotspot_n_named(const struct fp_hotspot *h, size_t *ret_failed)
{
        if (ret_failed)
                *ret_failed = h ? h->n_failed : 0;
        return h ? h->n_named : 0;
}
