/* SPDX-License-Identifier: MIT */
/*
 * The names of one build from its debug file (see dsyms.h).
 *
 * Function symbols (STT_FUNC, STT_GNU_IFUNC) of the debug file's .symtab
 * are sorted by address; of several at one address the global one wins,
 * then the shorter name, then the first in byte order, so the choice does
 * not depend on the file's order. A symbol without a size reaches to the
 * next one (at most UNSIZED_MAX bytes). Lookup is a binary search for the
 * last symbol starting at or before the address, which names it when the
 * address lies within its size.
 */
#include "dsyms.h"
#include "demangle.h"
#include "elfread.h"
#include "util.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNSIZED_MAX 4096u
#define NO_NAME     UINT32_MAX

struct dsym {
        uint64_t start, end;
        uint32_t name, system; /* into names; system NO_NAME: the name is the symbol */
};

struct fp_dsyms {
        unsigned long refs;
        struct dsym *syms;
        size_t n;
        char *names;
        size_t names_len, names_max; /* names_max: what the file's size allows */
        struct fp_dsyms_seg segs[FP_DSYMS_MAX_SEGS];
        size_t n_segs;
};

/* A symbol as read: its name points into the ELF's string table. */
struct raw {
        uint64_t start, size;
        const char *name;
        unsigned rank; /* 2 global, 1 weak, 0 local */
};

static uint64_t get(const uint8_t *p, size_t n, bool big)
{
        uint64_t v = 0;

        for (size_t i = 0; i < n; i++)
                v |= (uint64_t)p[big ? n - 1 - i : i] << (8 * i);
        return v;
}

int fp_dsyms_segments(const uint8_t *head, size_t len, struct fp_dsyms_seg *out, size_t max,
                      char *err, size_t errlen)
{
        bool wide, big;
        uint64_t phoff, phentsize, phnum;
        size_t k = 0;

        if (len < EI_NIDENT || memcmp(head, ELFMAG, SELFMAG) != 0) {
                fp_errf(err, errlen, 0, "the executable is not an ELF file");
                return -EBADMSG;
        }
        wide = head[EI_CLASS] == ELFCLASS64;
        big = head[EI_DATA] == ELFDATA2MSB;
        if ((!wide && head[EI_CLASS] != ELFCLASS32) || (!big && head[EI_DATA] != ELFDATA2LSB) ||
            len < (wide ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr))) {
                fp_errf(err, errlen, 0, "the executable's ELF header is damaged");
                return -EBADMSG;
        }
        if (wide) {
                phoff = get(head + offsetof(Elf64_Ehdr, e_phoff), 8, big);
                phentsize = get(head + offsetof(Elf64_Ehdr, e_phentsize), 2, big);
                phnum = get(head + offsetof(Elf64_Ehdr, e_phnum), 2, big);
        } else {
                phoff = get(head + offsetof(Elf32_Ehdr, e_phoff), 4, big);
                phentsize = get(head + offsetof(Elf32_Ehdr, e_phentsize), 2, big);
                phnum = get(head + offsetof(Elf32_Ehdr, e_phnum), 2, big);
        }
        if (phentsize < (wide ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)) || phnum == 0 ||
            phoff > len || phnum > (len - phoff) / phentsize) {
                fp_errf(err, errlen, 0,
                        "the executable's program headers are not within its first %zu bytes", len);
                return -EBADMSG;
        }
        for (uint64_t i = 0; i < phnum; i++) {
                const uint8_t *ph = head + phoff + i * phentsize;
                struct fp_dsyms_seg s;

                if (wide) {
                        if (get(ph + offsetof(Elf64_Phdr, p_type), 4, big) != PT_LOAD)
                                continue;
                        s.offset = get(ph + offsetof(Elf64_Phdr, p_offset), 8, big);
                        s.vaddr = get(ph + offsetof(Elf64_Phdr, p_vaddr), 8, big);
                        s.filesz = get(ph + offsetof(Elf64_Phdr, p_filesz), 8, big);
                } else {
                        if (get(ph + offsetof(Elf32_Phdr, p_type), 4, big) != PT_LOAD)
                                continue;
                        s.offset = get(ph + offsetof(Elf32_Phdr, p_offset), 4, big);
                        s.vaddr = get(ph + offsetof(Elf32_Phdr, p_vaddr), 4, big);
                        s.filesz = get(ph + offsetof(Elf32_Phdr, p_filesz), 4, big);
                }
                if (k == max) {
                        fp_errf(err, errlen, 0, "the executable has more than %zu segments", max);
                        return -EBADMSG;
                }
                out[k++] = s;
        }
        if (k == 0) {
                fp_errf(err, errlen, 0, "the executable has no loadable segment");
                return -EBADMSG;
        }
        return (int)k;
}

static int cmp_raw(const void *a, const void *b)
{
        const struct raw *x = a, *y = b;
        size_t lx, ly;

        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        if (x->rank != y->rank)
                return x->rank > y->rank ? -1 : 1;
        lx = strlen(x->name);
        ly = strlen(y->name);
        if (lx != ly)
                return lx < ly ? -1 : 1;
        return strcmp(x->name, y->name);
}

static unsigned rank_of(unsigned char bind)
{
        return bind == STB_GLOBAL || bind == STB_GNU_UNIQUE ? 2 : bind == STB_WEAK ? 1 : 0;
}

/* What read_symbols() gathers. */
struct reading {
        struct raw *v;
        size_t n, cap;
        bool arm;
};

static int read_one(void *arg, const GElf_Sym *s, const char *name)
{
        struct reading *rd = arg;

        if (rd->n == FP_DSYMS_MAX_SYMBOLS)
                return -EFBIG;
        if (fp_grow(&rd->v, &rd->cap, rd->n + 1, sizeof(*rd->v)) < 0)
                return -ENOMEM;
        rd->v[rd->n++] = (struct raw){
            .start = rd->arm ? s->st_value & ~(uint64_t)1 : s->st_value,
            .size = s->st_size,
            .name = name,
            .rank = rank_of(GELF_ST_BIND(s->st_info)),
        };
        return 0;
}

/* The function symbols of elf's .symtab into *ret (malloc'd, *ret_n of them). */
static int read_symbols(Elf *elf, struct raw **ret, size_t *ret_n, char *err, size_t errlen)
{
        struct reading rd = {0};
        GElf_Ehdr eh;
        int r;

        if (!gelf_getehdr(elf, &eh)) {
                fp_errf(err, errlen, 0, "the debug file's ELF header is damaged");
                return -EBADMSG;
        }
        rd.arm = eh.e_machine == EM_ARM;
        r = fp_elf_functions(elf, true, read_one, &rd, NULL);
        if (r == 0 && rd.n == 0) {
                fp_errf(err, errlen, 0, "the debug file has no function symbols");
                r = -EBADMSG;
        } else if (r == -EFBIG) {
                fp_errf(err, errlen, 0, "the debug file has over %u functions",
                        FP_DSYMS_MAX_SYMBOLS);
        }
        if (r < 0) {
                free(rd.v);
                return r;
        }
        *ret = rd.v;
        *ret_n = rd.n;
        return 0;
}

/*
 * Appends s (and its NUL) to d's names; its offset, or NO_NAME when out of
 * memory or past names_max (*ret_big then set).
 */
static uint32_t add_name(struct fp_dsyms *d, size_t *cap, const char *s, bool *ret_big)
{
        size_t l = strlen(s) + 1;
        uint32_t at = (uint32_t)d->names_len;

        if (d->names_len + l > d->names_max || d->names_len + l >= NO_NAME) {
                *ret_big = true;
                return NO_NAME;
        }
        if (fp_grow(&d->names, cap, d->names_len + l, 1) < 0)
                return NO_NAME;
        memcpy(d->names + d->names_len, s, l);
        d->names_len += l;
        return at;
}

/* One entry per address, demangled, from raw symbols sorted by cmp_raw. */
static int build(struct fp_dsyms *d, const struct raw *v, size_t n)
{
        static char buf[FP_DEMANGLE_MAX_OUT]; /* under the one loader's lock */
        size_t cap = 0, k = 0;
        bool big = false;

        d->syms = calloc(n, sizeof(*d->syms));
        if (!d->syms)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct dsym *s;
                bool dm;

                if (i && v[i].start == v[i - 1].start)
                        continue; /* the first of an address is the best */
                s = &d->syms[k++];
                dm = fp_demangle_into(v[i].name, buf, sizeof(buf)) == 1;
                s->start = v[i].start;
                s->end = v[i].size ? v[i].start + v[i].size : 0;
                s->name = add_name(d, &cap, dm ? buf : v[i].name, &big);
                s->system = dm ? add_name(d, &cap, v[i].name, &big) : NO_NAME;
                if (s->name == NO_NAME || (dm && s->system == NO_NAME))
                        return big ? -EFBIG : -ENOMEM;
        }
        d->n = k;
        for (size_t i = 0; i < k; i++) {
                struct dsym *s = &d->syms[i];
                uint64_t next = i + 1 < k ? d->syms[i + 1].start : UINT64_MAX;

                if (s->end <= s->start) /* no size, or one that wraps */
                        s->end = next - s->start > UNSIZED_MAX ? s->start + UNSIZED_MAX : next;
        }
        return 0;
}

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
_Static_assert(FP_DSYMS_ID_HEX == FP_ELF_BUILD_ID_HEX, "the two say the same");

/* The symbols of elf (a file of size bytes) once its build ID is checked. */
static int load_elf(Elf *elf, uint64_t size, const char *build_id, const struct fp_dsyms_seg *segs,
                    size_t n_segs, struct fp_dsyms **ret, char *err, size_t errlen)
{
        char id[FP_ELF_BUILD_ID_HEX];
        struct fp_dsyms *d = NULL;
        struct raw *v = NULL;
        size_t n = 0;
        int r;

        fp_elf_build_id(elf, id);
        if (strcmp(id, build_id) != 0) {
                fp_errf(err, errlen, 0, "the debug file is of build %s, not this one",
                        *id ? id : "(none)");
                return -EBADMSG;
        }
        r = read_symbols(elf, &v, &n, err, errlen);
        if (r < 0)
                return r;
        qsort(v, n, sizeof(*v), cmp_raw);
        d = calloc(1, sizeof(*d));
        r = -ENOMEM;
        if (!d)
                goto out;
        d->refs = 1;
        if (n_segs)
                memcpy(d->segs, segs, n_segs * sizeof(*segs));
        d->n_segs = n_segs;
        /*
         * Names may share their bytes in a string table (one name's tail is
         * another's), and a few kilobytes of file can hold a name of 4,000
         * bytes for each of 100,000 symbols: the names kept, each copied and
         * demangled (a C++ template's name demangled can be several times its
         * mangled one), may take at most four times the file and a megabyte.
         */
        d->names_max = 4 * (size_t)size + FP_DSYMS_NAMES_SLACK;
        pthread_mutex_lock(&load_lock);
        r = build(d, v, n);
        pthread_mutex_unlock(&load_lock);
        if (r == -EFBIG)
                fp_errf(err, errlen, 0,
                        "the debug file's names take more than %zu bytes in memory, four times its "
                        "size and 1 MiB",
                        d->names_max);
        if (r < 0)
                goto out;
        *ret = d;
        d = NULL;
out:
        if (r == -ENOMEM)
                fp_errf(err, errlen, 0, "out of memory reading the debug file");
        fp_dsyms_unref(d);
        free(v);
        return r;
}

int fp_dsyms_load(const char *path, const char *build_id, const struct fp_dsyms_seg *segs,
                  size_t n_segs, struct fp_dsyms **ret, char *err, size_t errlen)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        Elf *elf = NULL;
        int r;

        if (n_segs > FP_DSYMS_MAX_SEGS)
                return -EINVAL;
        elf_version(EV_CURRENT);
        r = fp_elf_open(path, &fd, &elf, &st);
        if (r < 0) {
                fp_errf(err, errlen, 0, "the debug file is %s",
                        r == -ENOEXEC ? "not an ELF file" : strerror(-r));
                return r == -ENOEXEC ? -EBADMSG : r;
        }
        r = load_elf(elf, (uint64_t)st.st_size, build_id, segs, n_segs, ret, err, errlen);
        elf_end(elf);
        return r;
}

/* elf_memory() over a copy's bytes it never writes (ELF_C_READ_MMAP semantics). */
static Elf *elf_of(const uint8_t *data, size_t len)
{
        elf_version(EV_CURRENT);
        if (len < SELFMAG || memcmp(data, ELFMAG, SELFMAG) != 0)
                return NULL;
        Elf *elf = elf_memory((char *)data, len);
        if (elf && elf_kind(elf) != ELF_K_ELF) {
                elf_end(elf);
                return NULL;
        }
        return elf;
}

int fp_dsyms_load_mem(const uint8_t *data, size_t len, const char *build_id, struct fp_dsyms **ret,
                      char *err, size_t errlen)
{
        struct fp_dsyms_seg segs[FP_DSYMS_MAX_SEGS];
        int n_segs = 0, r;
        bool exec = false;
        char id[FP_ELF_BUILD_ID_HEX];

        r = fp_dsyms_inspect(data, len, id, &exec, err, errlen);
        if (r < 0)
                return r;
        if (exec) { /* an executable's own program headers place its file offsets */
                n_segs =
                    fp_dsyms_segments(data, len < FP_DSYMS_HEAD_BYTES ? len : FP_DSYMS_HEAD_BYTES,
                                      segs, FP_DSYMS_MAX_SEGS, err, errlen);
                if (n_segs < 0)
                        return n_segs;
        }
        Elf *elf = elf_of(data, len);
        if (!elf)
                return fp_errf(err, errlen, -EBADMSG, "the debug file is not an ELF file");
        r = load_elf(elf, len, build_id, segs, (size_t)n_segs, ret, err, errlen);
        elf_end(elf);
        return r;
}

int fp_dsyms_inspect(const uint8_t *data, size_t len, char *id, bool *ret_executable, char *err,
                     size_t errlen)
{
        Elf *elf = elf_of(data, len);
        GElf_Ehdr eh;
        size_t shstrndx;
        bool text = false, symbols;

        *id = 0;
        if (!elf)
                return fp_errf(err, errlen, -EBADMSG, "the file is not an ELF file");
        if (!gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx) < 0) {
                elf_end(elf);
                return fp_errf(err, errlen, -EBADMSG, "the file's ELF headers are damaged");
        }
        /* Every section's bytes must lie in the file: a cut file is refused here. */
        for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
                GElf_Shdr sh;
                const char *name;

                if (!gelf_getshdr(scn, &sh)) {
                        elf_end(elf);
                        return fp_errf(err, errlen, -EBADMSG,
                                       "the file's section headers are damaged");
                }
                if (sh.sh_type != SHT_NOBITS &&
                    (sh.sh_offset > len || sh.sh_size > len - sh.sh_offset)) {
                        elf_end(elf);
                        return fp_errf(err, errlen, -EBADMSG,
                                       "the file is cut short: a section ends at byte %" PRIu64
                                       " of %zu",
                                       (uint64_t)(sh.sh_offset + sh.sh_size), len);
                }
                name = elf_strptr(elf, shstrndx, sh.sh_name);
                if (name && strcmp(name, ".text") == 0 && sh.sh_type == SHT_PROGBITS)
                        text = true;
        }
        if (eh.e_shoff > len || (uint64_t)eh.e_shnum * eh.e_shentsize > len - eh.e_shoff) {
                elf_end(elf);
                return fp_errf(err, errlen, -EBADMSG,
                               "the file is cut short: its section headers are past its end");
        }
        fp_elf_build_id(elf, id);
        symbols = fp_elf_has_symtab(elf);
        elf_end(elf);
        if (!*id)
                return fp_errf(err, errlen, -EBADMSG,
                               "the file has no build ID (a GNU build-id note)");
        if (!symbols)
                return fp_errf(
                    err, errlen, -EBADMSG,
                    "the file has no symbol table (.symtab): a stripped file names nothing");
        *ret_executable = text && eh.e_phnum > 0;
        return 0;
}

struct fp_dsyms *fp_dsyms_ref(struct fp_dsyms *d)
{
        __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
        return d;
}

void fp_dsyms_unref(struct fp_dsyms *d)
{
        if (!d || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return;
        free(d->syms);
        free(d->names);
        free(d);
}

const char *fp_dsyms_name(const struct fp_dsyms *d, uint64_t off, const char **ret_system)
{
        *ret_system = NULL;
        for (size_t i = 0; i < d->n_segs; i++) {
                const struct fp_dsyms_seg *s = &d->segs[i];

                if (off >= s->offset && off - s->offset < s->filesz)
                        return fp_dsyms_name_at(d, off - s->offset + s->vaddr, ret_system);
        }
        return NULL;
}

const char *fp_dsyms_name_at(const struct fp_dsyms *d, uint64_t vaddr, const char **ret_system)
{
        size_t lo = 0, hi = d->n;

        *ret_system = NULL;
        while (lo < hi) { /* the first symbol starting after vaddr */
                size_t mid = lo + (hi - lo) / 2;

                if (d->syms[mid].start <= vaddr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0 || vaddr >= d->syms[lo - 1].end)
                return NULL;
        if (d->syms[lo - 1].system != NO_NAME)
                *ret_system = d->names + d->syms[lo - 1].system;
        return d->names + d->syms[lo - 1].name;
}

size_t fp_dsyms_bytes(const struct fp_dsyms *d)
{
        return sizeof(*d) + d->n * sizeof(*d->syms) + d->names_len;
}

size_t fp_dsyms_count(const struct fp_dsyms *d)
{
        return d->n;
}
