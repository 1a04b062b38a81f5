/* SPDX-License-Identifier: MIT */
/*
 * Interpreted Java methods named from a HotSpot JVM's memory; see hotspot.h.
 */
#include "hotspot-internal.h"
#include "elfread.h"
#include "util.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Entries of VMStructs or VMTypes read at most: OpenJDK 17 has about 1,400
 * and 600; a table without an end (a process that lies) costs a bounded
 * walk, two reads of the JVM's memory an entry.
 */
#define TABLE_MAX_ENTRIES 8192
#define TABLE_CHUNK       64 /* entries read at once */
#define ENTRY_MAX_STRIDE  256
#define TABLE_NAME_MAX    80 /* a type or field name read */

static const char *const fields[N_FIELDS][2] = {
    {"Method", "_constMethod"},
    {"ConstMethod", "_constants"},
    {"ConstMethod", "_name_index"},
    {"ConstMethod", "_signature_index"},
    {"ConstantPool", "_pool_holder"},
    {"ConstantPool", "_length"},
    {"Klass", "_name"},
    {"Symbol", "_length"},
    {"Symbol", "_body"},
    {"CodeCache", "_heaps"},
    {"GrowableArrayBase", "_len"},
    {"GrowableArray<int>", "_data"},
    {"CodeHeap", "_memory"},
    {"CodeHeap", "_segmap"},
    {"CodeHeap", "_log2_segment_size"},
    {"VirtualSpace", "_low"},
    {"VirtualSpace", "_high"},
    {"HeapBlock", "_header"},
    {"HeapBlock::Header", "_used"},
    {"CodeBlob", "_name"},
    {"CodeBlob", "_frame_complete_offset"},
    {"CodeBlob", "_frame_size"},
    {"CodeBlob", "_code_begin"},
    {"CodeBlob", "_code_end"},
    {"CompiledMethod", "_method"},
    {"CompiledMethod", "_scopes_data_begin"},
    {"nmethod", "_stub_offset"},
    {"nmethod", "_metadata_offset"},
    {"nmethod", "_scopes_pcs_offset"},
    {"nmethod", "_dependencies_offset"},
    {"nmethod", "_verified_entry_point"},
    {"nmethod", "_compile_id"},
    {"PcDesc", "_pc_offset"},
    {"PcDesc", "_scope_decode_offset"},
};
static const char *const types[N_TYPES] = {"ConstantPool", "HeapBlock", "PcDesc", "nmethod"};

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
 * One of the JVM's tables (VMStructs or VMTypes): entries of stride bytes,
 * ended by one whose type name is NULL. Each has its type name (at
 * name_off), a second string (a field's name, at second_off, when
 * has_second) and its number (at value_off); a VMStructs entry whose flag
 * at static_off is set (has_static) is a static field, whose number is its
 * address (at addr_off).
 */
struct table {
        uint64_t at, stride, name_off, second_off, value_off, static_off, addr_off;
        bool has_second, has_static;
};

typedef void (*entry_fn)(struct fp_hotspot *h, const char *type, const char *second,
                         uint64_t value);

static bool table_ok(const struct table *t)
{
        uint64_t last = t->stride - 8;

        return t->at && t->stride >= 8 && t->stride <= ENTRY_MAX_STRIDE && t->name_off <= last &&
               t->value_off <= last && (!t->has_second || t->second_off <= last) &&
               (!t->has_static || (t->static_off <= t->stride - 4 && t->addr_off <= last));
}

/* Calls fn with each entry's strings and number. */
static int walk(struct fp_hotspot *h, const struct table *t, entry_fn fn)
{
        uint8_t chunk[TABLE_CHUNK * ENTRY_MAX_STRIDE];

        if (!table_ok(t))
                return -EINVAL;
        for (uint64_t i = 0; i < TABLE_MAX_ENTRIES; i += TABLE_CHUNK) {
                /* A chunk past the table's last page is read entry by entry. */
                bool whole =
                    fp_hotspot_peek(h->pid, t->at + i * t->stride, chunk, TABLE_CHUNK * t->stride);
                for (uint64_t k = 0; k < TABLE_CHUNK; k++) {
                        const uint8_t *e = chunk + k * t->stride;
                        uint64_t type_p, second_p = 0, value;
                        int32_t is_static = 0;
                        char type[TABLE_NAME_MAX], second[TABLE_NAME_MAX] = "";
                        if (!whole && !fp_hotspot_peek(h->pid, t->at + (i + k) * t->stride,
                                                       chunk + k * t->stride, t->stride))
                                return -EIO;
                        memcpy(&type_p, e + t->name_off, 8);
                        if (!type_p)
                                return 0;
                        if (t->has_second)
                                memcpy(&second_p, e + t->second_off, 8);
                        if (t->has_static)
                                memcpy(&is_static, e + t->static_off, 4);
                        memcpy(&value, e + (is_static ? t->addr_off : t->value_off), 8);
                        if (!fp_hotspot_peek_cstr(h->pid, type_p, type, sizeof(type)) ||
                            (second_p &&
                             !fp_hotspot_peek_cstr(h->pid, second_p, second, sizeof(second))))
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
                        h->found |= 1ull << i;
                }
}

static void take_type(struct fp_hotspot *h, const char *type, const char *unused, uint64_t size)
{
        (void)unused;
        for (int i = 0; i < N_TYPES; i++)
                if (strcmp(type, types[i]) == 0)
                        h->size[i] = size;
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
            "gHotSpotVMStructEntryIsStaticOffset",
            "gHotSpotVMStructEntryAddressOffset",
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
                if (!fp_hotspot_peek_u64(pid, at[i], &v[i])) {
                        int e = errno ? errno : EIO;
                        snprintf(why, len, "cannot read the JVM's memory (%s): %s", names[i],
                                 strerror(e));
                        return e == ESRCH ? -ESRCH : -EIO;
                }
        if (!(h = calloc(1, sizeof(*h))))
                return -ENOMEM;
        h->pid = pid;
        const struct table structs = {.at = v[0],
                                      .stride = v[1],
                                      .name_off = v[2],
                                      .second_off = v[3],
                                      .value_off = v[4],
                                      .static_off = v[5],
                                      .addr_off = v[6],
                                      .has_second = true,
                                      .has_static = true};
        const struct table vmtypes = {
            .at = v[7], .stride = v[8], .name_off = v[9], .value_off = v[10]};
        r = walk(h, &structs, take_field);
        if (r >= 0)
                r = walk(h, &vmtypes, take_type);
        if (r >= 0 && (h->found & ((1ull << N_NAME_FIELDS) - 1)) != (1ull << N_NAME_FIELDS) - 1)
                r = -ENOENT;
        if (r < 0 || !h->size[T_CONSTANT_POOL] || h->size[T_CONSTANT_POOL] > 4096) {
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
        fp_hotspot_code_free(h);
        for (size_t i = 0; i < h->n_slots; i++)
                free(h->slots[i].name);
        free(h->slots);
        free(h);
}

/* A Symbol's text (at most len - 1 bytes of printable ASCII or UTF-8). */
static bool symbol(const struct fp_hotspot *h, uint64_t sym, char *out, size_t len)
{
        uint16_t n;

        if (!fp_hotspot_peek(h->pid, sym + h->off[F_SYMBOL_LENGTH], &n, sizeof(n)) || n == 0 ||
            n >= len || !fp_hotspot_peek(h->pid, sym + h->off[F_SYMBOL_BODY], out, n))
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

        if (!fp_hotspot_peek_u64(h->pid, method + h->off[F_METHOD_CONST], &cm) ||
            !fp_hotspot_peek_u64(h->pid, cm + h->off[F_CONST_CONSTANTS], &cp) ||
            !fp_hotspot_peek(h->pid, cm + h->off[F_CONST_NAME], &ni, sizeof(ni)) ||
            !fp_hotspot_peek(h->pid, cm + h->off[F_CONST_SIGNATURE], &si, sizeof(si)) ||
            !fp_hotspot_peek(h->pid, cp + h->off[F_POOL_LENGTH], &pool_len, sizeof(pool_len)) ||
            ni >= pool_len || si >= pool_len ||
            !fp_hotspot_peek_u64(h->pid, cp + h->off[F_POOL_HOLDER], &holder) ||
            !fp_hotspot_peek_u64(h->pid, holder + h->off[F_KLASS_NAME], &kname) ||
            !fp_hotspot_peek_u64(h->pid, cp + h->size[T_CONSTANT_POOL] + (uint64_t)ni * 8,
                                 &name_sym) ||
            !fp_hotspot_peek_u64(h->pid, cp + h->size[T_CONSTANT_POOL] + (uint64_t)si * 8,
                                 &sig_sym) ||
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
                struct fp_hotspot_method_slot *slots = calloc(n, sizeof(*slots));
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
        h->slots[j] = (struct fp_hotspot_method_slot){method, read_method(h, method)};
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
