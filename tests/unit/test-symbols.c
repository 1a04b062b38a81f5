/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the ELF symbolizer (agent/stacks/symbols.c). The test compiles
 * small programs at run time (cc, objcopy, a hand-written assembly file for
 * nested and unsized symbols) into a temporary directory and checks the
 * symtab against other tools: build IDs against `readelf -n`, symbol
 * addresses against `nm -S`, file offsets against the program headers
 * parsed here by hand. Then the cache (one parse per build ID, per inode
 * without one or for a file root does not vouch for, path revalidation), separate debug files, the
 * vdso (its .dynsym walked here by hand), kallsyms (a synthetic file, and the real one when
 * readable), errors, and a real lookup in the running libc.
 */
#include "symbols.h"
#include "fp-test.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[256];

static const char prog_c[] =
    "#include <stdio.h>\n"
    "__attribute__((noinline)) int fp_test_alpha(int x)\n"
    "{\n"
    "        volatile int y = x;\n"
    "        for (int i = 0; i < 10; i++)\n"
    "                y += i;\n"
    "        return y;\n"
    "}\n"
    "__attribute__((noinline)) int fp_test_beta(int x)\n"
    "{\n"
    "        return fp_test_alpha(x) * 2;\n"
    "}\n"
    "static __attribute__((noinline)) int fp_test_local(int x)\n"
    "{\n"
    "        return x + 1;\n"
    "}\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "        (void)argv;\n"
    "        printf(\"%d\\n\", fp_test_beta(argc) + fp_test_local(argc));\n"
    "        return 0;\n"
    "}\n";

/*
 * outer [0, 16) holds inner [4, 8); alias_outer names outer's address too;
 * gap_after [16, 20) is followed by 12 bytes of no symbol; nosize has no
 * size and so extends to last_sized.
 */
static const char nest_s[] = "        .text\n"
                             "        .globl outer\n"
                             "        .type outer, @function\n"
                             "outer:\n"
                             "        .fill 4, 1, 0x90\n"
                             "        .globl inner\n"
                             "        .type inner, @function\n"
                             "inner:\n"
                             "        .fill 4, 1, 0x90\n"
                             "        .size inner, 4\n"
                             "        .fill 8, 1, 0x90\n"
                             "        .size outer, 16\n"
                             "        .globl alias_outer\n"
                             "        .type alias_outer, @function\n"
                             "        .set alias_outer, outer\n"
                             "        .size alias_outer, 16\n"
                             "        .globl gap_after\n"
                             "        .type gap_after, @function\n"
                             "gap_after:\n"
                             "        .fill 4, 1, 0x90\n"
                             "        .size gap_after, 4\n"
                             "        .fill 12, 1, 0x90\n"
                             "        .globl nosize\n"
                             "        .type nosize, @function\n"
                             "nosize:\n"
                             "        .fill 8, 1, 0x90\n"
                             "        .globl last_sized\n"
                             "        .type last_sized, @function\n"
                             "last_sized:\n"
                             "        .fill 4, 1, 0x90\n"
                             "        .size last_sized, 4\n"
                             "        .section .note.GNU-stack,\"\",@progbits\n";

static const char kallsyms_fake[] = "ffffffff81000000 T _stext\n"
                                    "ffffffff81000000 T _text\n"
                                    "ffffffff81000100 t local_fn\n"
                                    "ffffffff81000200 D some_data\n"
                                    "ffffffff81000300 W weak_fn\n"
                                    "ffffffffc0001000 t mod_fn\t[mymod]\n";

static const char kallsyms_hidden[] = "0000000000000000 T _stext\n"
                                      "0000000000000000 t local_fn\n"
                                      "0000000000000000 t mod_fn\t[mymod]\n";

static const char *in_dir(const char *name)
{
        static char bufs[8][512];
        static unsigned next;
        char *b = bufs[next++ % 8];

        snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
        return b;
}

static bool write_file(const char *path, const char *data)
{
        FILE *f = fopen(path, "we");
        bool ok;

        if (!f)
                return false;
        ok = fputs(data, f) >= 0;
        return fclose(f) == 0 && ok;
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
        char cmd[2048];
        va_list ap;
        int r;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        r = system(cmd);
        if (r != 0)
                fprintf(stderr, "command failed (%d): %s\n", r, cmd);
        return r;
}

/* Address and size (0 if nm shows none) of symbol name in path, from `nm -S`. */
static bool nm_lookup(const char *path, const char *name, uint64_t *ret_addr, uint64_t *ret_size)
{
        char cmd[600], line[512];
        bool found = false;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "nm -S '%s' 2>/dev/null", path);
        p = popen(cmd, "r");
        if (!p)
                return false;
        while (!found && fgets(line, sizeof(line), p)) {
                char n[256], type;
                unsigned long long a, s;

                if (sscanf(line, "%llx %llx %c %255s", &a, &s, &type, n) == 4 &&
                    strcmp(n, name) == 0) {
                        *ret_addr = a;
                        *ret_size = s;
                        found = true;
                } else if (sscanf(line, "%llx %c %255s", &a, &type, n) == 3 &&
                           strcmp(n, name) == 0) {
                        *ret_addr = a;
                        *ret_size = 0;
                        found = true;
                }
        }
        pclose(p);
        return found;
}

/* The build ID `readelf -n` prints for path, "" if none; out holds 256 bytes. */
static void readelf_build_id(const char *path, char *out)
{
        char cmd[600], line[512];
        FILE *p;

        out[0] = '\0';
        snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
        p = popen(cmd, "r");
        if (!p)
                return;
        while (fgets(line, sizeof(line), p)) {
                char *s = strstr(line, "Build ID: ");

                if (s && sscanf(s + 10, "%255s", out) != 1)
                        out[0] = '\0';
        }
        pclose(p);
}

/* File offset of vaddr in the 64-bit ELF file at path, from its program headers. */
static bool file_offset_of(const char *path, uint64_t vaddr, uint64_t *ret)
{
        unsigned char buf[65536];
        Elf64_Ehdr eh;
        bool found = false;
        FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return false;
        n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        if (n < sizeof(eh))
                return false;
        memcpy(&eh, buf, sizeof(eh));
        for (unsigned i = 0; i < eh.e_phnum && !found; i++) {
                Elf64_Phdr ph;

                if (eh.e_phoff + (i + 1) * sizeof(ph) > n)
                        break;
                memcpy(&ph, buf + eh.e_phoff + i * sizeof(ph), sizeof(ph));
                if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr &&
                    vaddr < ph.p_vaddr + ph.p_filesz) {
                        *ret = vaddr - ph.p_vaddr + ph.p_offset;
                        found = true;
                }
        }
        return found;
}

/* Checks that name resolves in t through its file offset, at start, start+1 and its last byte. */
static void check_function(struct fp_symtab *t, const char *path, const char *name)
{
        uint64_t addr = 0, size = 0, off = 0, vaddr = 0, start = 0;

        FP_CHECK(nm_lookup(path, name, &addr, &size));
        FP_CHECK(size > 1);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, addr, &start), name);
        FP_CHECK_EQ_INT(start, addr);
        start = 0;
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, addr + 1, &start), name);
        FP_CHECK_EQ_INT(start, addr);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, addr + size - 1, NULL), name);
        const char *after = fp_symtab_lookup(t, addr + size, NULL);
        FP_CHECK(!after || strcmp(after, name) != 0);

        FP_CHECK(file_offset_of(path, addr + 1, &off));
        FP_CHECK_EQ_INT(fp_symtab_offset_to_vaddr(t, off, &vaddr), 0);
        FP_CHECK_EQ_INT(vaddr, addr + 1);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, vaddr, NULL), name);
}

static bool build_programs(void)
{
        const char *d = dir;
        char bid[256];

        if (!write_file(in_dir("prog.c"), prog_c) || !write_file(in_dir("nest.s"), nest_s) ||
            !write_file(in_dir("notelf"), "this is not an ELF file\n") ||
            !write_file(in_dir("empty"), "") ||
            !write_file(in_dir("kallsyms-fake"), kallsyms_fake) ||
            !write_file(in_dir("kallsyms-hidden"), kallsyms_hidden) ||
            !write_file(in_dir("kallsyms-empty"), ""))
                return false;
        if (run("cd '%s' && cc -O0 -g -Wl,--build-id -o prog prog.c && "
                "cc -O0 -g -no-pie -fno-pie -Wl,--build-id -o prog-exec prog.c && "
                "cc -O0 -g -Wl,--build-id=none -o prog-nobid prog.c && "
                "cc -shared -nostdlib -Wl,--build-id -o nest.so nest.s && "
                "cp prog prog-copy && cp prog prog-swap && cp prog-nobid prog-nobid-copy && "
                "ln prog-nobid prog-nobid-link && "
                "objcopy --only-keep-debug prog prog.debug && "
                "objcopy --strip-all prog prog-stripped",
                d) != 0)
                return false;
        readelf_build_id(in_dir("prog"), bid);
        if (strlen(bid) < 3)
                return false;
        return run("mkdir -p '%s/debug/.build-id/%.2s' && cp '%s/prog.debug' "
                   "'%s/debug/.build-id/%.2s/%s.debug'",
                   d, bid, d, d, bid, bid + 2) == 0;
}

static void test_program(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL, *t2 = NULL;
        char bid[256];
        uint64_t first = 0, vaddr = 0;

        FP_CHECK(c != NULL);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog"), NULL, &t), 0);
        if (!t) {
                fp_symcache_free(c);
                return;
        }
        readelf_build_id(in_dir("prog"), bid);
        FP_CHECK(strlen(bid) >= 16);
        FP_CHECK_EQ_STR(fp_symtab_build_id(t), bid);
        FP_CHECK(fp_symtab_n_symbols(t) >= 4);
        check_function(t, in_dir("prog"), "fp_test_alpha");
        check_function(t, in_dir("prog"), "fp_test_beta");
        check_function(t, in_dir("prog"), "fp_test_local");
        check_function(t, in_dir("prog"), "main");

        /* Before the first symbol, past everything, and offsets outside every segment. */
        FP_CHECK(fp_symtab_symbol(t, 0, &first) != NULL);
        FP_CHECK(first > 0);
        FP_CHECK(fp_symtab_lookup(t, first - 1, NULL) == NULL);
        FP_CHECK(fp_symtab_lookup(t, 0, NULL) == NULL);
        FP_CHECK(fp_symtab_lookup(t, UINT64_MAX, NULL) == NULL);
        FP_CHECK(fp_symtab_symbol(t, fp_symtab_n_symbols(t), NULL) == NULL);
        FP_CHECK_EQ_INT(fp_symtab_offset_to_vaddr(t, UINT64_C(1) << 40, &vaddr), -ENOENT);

        /* Symbols come out in strictly increasing address order. */
        bool sorted = true;
        for (size_t i = 1; i < fp_symtab_n_symbols(t); i++) {
                uint64_t a, b;

                fp_symtab_symbol(t, i - 1, &a);
                fp_symtab_symbol(t, i, &b);
                sorted &= a < b;
        }
        FP_CHECK(sorted);

        /* A non-PIE executable: absolute addresses, which offsets map to as well. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-exec"), NULL, &t2), 0);
        if (t2) {
                readelf_build_id(in_dir("prog-exec"), bid);
                FP_CHECK_EQ_STR(fp_symtab_build_id(t2), bid);
                FP_CHECK(strcmp(fp_symtab_build_id(t2), fp_symtab_build_id(t)) != 0);
                check_function(t2, in_dir("prog-exec"), "fp_test_alpha");
                check_function(t2, in_dir("prog-exec"), "fp_test_beta");
                fp_symtab_unref(t2);
        }

        /* The symtab outlives the cache. */
        fp_symcache_free(c);
        check_function(t, in_dir("prog"), "fp_test_alpha");
        fp_symtab_unref(t);
}

static void test_nested(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL;
        uint64_t outer = 0, inner = 0, gap = 0, nosize = 0, last = 0, size, start = 0;

        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("nest.so"), NULL, &t), 0);
        FP_CHECK(nm_lookup(in_dir("nest.so"), "outer", &outer, &size));
        FP_CHECK(nm_lookup(in_dir("nest.so"), "inner", &inner, &size));
        FP_CHECK(nm_lookup(in_dir("nest.so"), "gap_after", &gap, &size));
        FP_CHECK(nm_lookup(in_dir("nest.so"), "nosize", &nosize, &size));
        FP_CHECK(nm_lookup(in_dir("nest.so"), "last_sized", &last, &size));
        if (!t) {
                fp_symcache_free(c);
                return;
        }
        FP_CHECK_EQ_INT(inner, outer + 4);
        /* The alias is deduplicated in favour of the plainer name. */
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, outer, &start), "outer");
        FP_CHECK_EQ_INT(start, outer);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, outer + 3, NULL), "outer");
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, inner, &start), "inner");
        FP_CHECK_EQ_INT(start, inner);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, inner + 3, NULL), "inner");
        /* Past the nested symbol, the enclosing one resumes. */
        start = 0;
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, inner + 4, &start), "outer");
        FP_CHECK_EQ_INT(start, outer);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, outer + 15, NULL), "outer");
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, outer + 16, NULL), "gap_after");
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, gap + 3, NULL), "gap_after");
        /* A sized symbol's end leaves a gap; an unsized one reaches the next. */
        FP_CHECK(fp_symtab_lookup(t, gap + 4, NULL) == NULL);
        FP_CHECK(fp_symtab_lookup(t, gap + 15, NULL) == NULL);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, nosize + 7, NULL), "nosize");
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, last + 3, NULL), "last_sized");
        FP_CHECK(fp_symtab_lookup(t, last + 4, NULL) == NULL);
        FP_CHECK(fp_symtab_lookup(t, outer - 1, NULL) == NULL);
        fp_symtab_unref(t);
        fp_symcache_free(c);
}

static void test_cache(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *a = NULL, *b = NULL, *x = NULL, *y = NULL, *z = NULL;
        uint64_t addr = 0, size = 0;

        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog"), NULL, &a), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 1);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog"), NULL, &b), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 1);
        FP_CHECK(a && a == b);
        fp_symtab_unref(b);
        /* Another path, same build ID: one symtab. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-copy"), NULL, &b), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 1);
        FP_CHECK(a && a == b);
        fp_symtab_unref(b);
        b = NULL;

        /* Without a build ID: keyed by inode, so a hard link shares and a copy does not. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-nobid"), NULL, &x), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 2);
        FP_CHECK(x && x != a);
        if (x) {
                FP_CHECK_EQ_STR(fp_symtab_build_id(x), "");
                check_function(x, in_dir("prog-nobid"), "fp_test_alpha");
        }
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-nobid"), NULL, &y), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-nobid-link"), NULL, &z), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 2);
        FP_CHECK(x == y && x == z);
        fp_symtab_unref(y);
        fp_symtab_unref(z);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-nobid-copy"), NULL, &y), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 3);
        FP_CHECK(y && y != x);
        fp_symtab_unref(y);

        /* A path whose file is replaced is re-read. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-swap"), NULL, &y), 0);
        FP_CHECK(y == a);
        fp_symtab_unref(y);
        FP_CHECK_EQ_INT(run("cp '%s/prog-exec' '%s/prog-swap.new' && mv '%s/prog-swap.new' "
                            "'%s/prog-swap'",
                            dir, dir, dir, dir),
                        0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-swap"), NULL, &y), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 4);
        FP_CHECK(y && y != a);
        if (y) {
                FP_CHECK(nm_lookup(in_dir("prog-exec"), "fp_test_beta", &addr, &size));
                FP_CHECK_EQ_STR(fp_symtab_lookup(y, addr, NULL), "fp_test_beta");
                fp_symtab_unref(y);
        }
        /* prog-exec itself now costs no parse. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-exec"), NULL, &y), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 4);
        fp_symtab_unref(y);

        fp_symtab_unref(a);
        fp_symtab_unref(x);
        fp_symcache_free(c);
}

/*
 * A file anyone but root could have written that claims prog's build ID
 * (forged: other functions, the same note) must neither stand in for prog
 * nor replace it, whichever is read first; root's own copies still share.
 */
static void test_forged_build_id(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *p = NULL, *f = NULL, *again = NULL;
        uint64_t alpha = 0, evil = 0, size = 0;
        char bid[256], fbid[256];

        readelf_build_id(in_dir("prog"), bid);
        FP_CHECK_EQ_INT(run("cd '%s' && sed 's/fp_test_/fp_evil_/g' prog.c > forged.c && "
                            "cc -O0 -g -Wl,--build-id=0x%s -o forged forged.c && "
                            "cp forged forged-root && chown 65534 forged && "
                            "cp prog prog-writable && chmod 666 prog-writable",
                            dir, bid),
                        0);
        readelf_build_id(in_dir("forged"), fbid);
        FP_CHECK_EQ_STR(fbid, bid);
        FP_CHECK(nm_lookup(in_dir("prog"), "fp_test_alpha", &alpha, &size));
        FP_CHECK(nm_lookup(in_dir("forged"), "fp_evil_alpha", &evil, &size));

        /* The forged file first: its own table, under its own key. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("forged"), NULL, &f), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog"), NULL, &p), 0);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 2);
        FP_CHECK(p && f && p != f);
        if (p && f) {
                FP_CHECK_EQ_STR(fp_symtab_lookup(p, alpha, NULL), "fp_test_alpha");
                FP_CHECK_EQ_STR(fp_symtab_lookup(f, evil, NULL), "fp_evil_alpha");
        }
        /* Again, in the other order: prog's table is not replaced by the forged one. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("forged"), NULL, &again), 0);
        FP_CHECK(again == f);
        fp_symtab_unref(again);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-copy"), NULL, &again), 0);
        FP_CHECK(again == p); /* root's copies share */
        fp_symtab_unref(again);
        /* A root file that others may write is not trusted either. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-writable"), NULL, &again), 0);
        FP_CHECK(again && again != p);
        fp_symtab_unref(again);
        /* Root's own file with that build ID is root's word: shared. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("forged-root"), NULL, &again), 0);
        FP_CHECK(again == p);
        fp_symtab_unref(again);
        fp_symtab_unref(p);
        fp_symtab_unref(f);
        fp_symcache_free(c);
}

/*
 * Past its limit of files, the cache forgets the tables no mapping holds
 * and keeps the ones held: 12 files (group-writable copies, so each is its
 * own key) through a cache of 4.
 */
static void test_eviction(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *held = NULL, *t = NULL, *again = NULL;
        char name[32];

        FP_CHECK_EQ_INT(run("cd '%s' && for i in 0 1 2 3 4 5 6 7 8 9 10 11; do "
                            "cp prog evict-$i && chmod 664 evict-$i; done",
                            dir),
                        0);
        fp_symcache_set_max_files(c, 4);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("evict-0"), NULL, &held), 0);
        for (int i = 1; i < 12; i++) {
                snprintf(name, sizeof(name), "evict-%d", i);
                FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir(name), NULL, &t), 0);
                fp_symtab_unref(t);
                FP_CHECK(fp_symcache_n_files(c) <= 4);
        }
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 12);
        /* The held table survived every eviction: asked again, it is not read again. */
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("evict-0"), NULL, &again), 0);
        FP_CHECK(again == held);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 12);
        fp_symtab_unref(again);
        fp_symtab_unref(held);
        fp_symcache_free(c);
}

/* Waits for l (at most 10 s): fp_symcache_poll's last answer. */
static int poll_load(struct fp_symcache *c, struct fp_symload *l, struct fp_symtab **t)
{
        int r = -EINPROGRESS;

        for (int i = 0; i < 10000 && r == -EINPROGRESS; i++) {
                r = fp_symcache_poll(c, l, t);
                if (r == -EINPROGRESS)
                        usleep(1000);
        }
        return r;
}

/*
 * Loads on the loader threads: a load not waited for is polled to the
 * same table a blocking get gives, whether or not a second load of the
 * file shares it (test-hostile shows the sharing); the first path that is
 * the wanted file wins; a file
 * other than the wanted one is refused; loads dropped before, while or
 * after they are read leak nothing (ASan), and the cache frees with its
 * loaders.
 */
static void test_loads(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL, *u = NULL, *g = NULL;
        struct fp_symload *l1 = NULL, *l2 = NULL, *l3 = NULL;
        const char *prog = in_dir("prog");
        const char *paths[2] = {"/nonexistent/prog", prog};
        struct stat st;
        struct fp_file_id id = {0}, other = {0};

        FP_CHECK_EQ_INT(stat(prog, &st), 0);
        id = (struct fp_file_id){.dev = st.st_dev, .ino = st.st_ino};
        FP_CHECK_EQ_INT(stat(in_dir("prog-copy"), &st), 0);
        other = (struct fp_file_id){.dev = st.st_dev, .ino = st.st_ino};

        FP_CHECK_EQ_INT(fp_symcache_start(c, paths, 2, &id, 0, 0, &t, &l1), -EINPROGRESS);
        FP_CHECK_EQ_INT(fp_symcache_start(c, paths + 1, 1, &id, 0, 0, &u, &l2), -EINPROGRESS);
        FP_CHECK_EQ_INT(poll_load(c, l1, &t), 0);
        FP_CHECK_EQ_INT(poll_load(c, l2, &u), 0);
        FP_CHECK(t && t == u);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 1);
        FP_CHECK_EQ_INT(fp_symcache_n_loading(c), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, prog, &id, &g), 0);
        FP_CHECK(g == t);
        if (t)
                check_function(t, prog, "fp_test_alpha");
        fp_symtab_unref(t);
        fp_symtab_unref(u);
        fp_symtab_unref(g);
        t = NULL;

        /* Waited for: done at once. Another file than the one wanted: refused. */
        FP_CHECK_EQ_INT(fp_symcache_start(c, paths, 2, &id, 0, 5000, &t, &l3), 0);
        FP_CHECK(t != NULL);
        fp_symtab_unref(t);
        t = NULL;
        FP_CHECK_EQ_INT(fp_symcache_start(c, paths + 1, 1, &other, 0, 5000, &t, &l3), -ESTALE);
        FP_CHECK(t == NULL);

        /* Dropped before or while read, and outstanding at free: nothing leaks. */
        l1 = l2 = NULL;
        FP_CHECK_EQ_INT(fp_symcache_start(c, paths + 1, 1, &other, 0, 0, &t, &l1), -EINPROGRESS);
        fp_symcache_cancel(c, l1);
        FP_CHECK_EQ_INT(fp_symcache_start(c, paths + 1, 1, NULL, 0, 0, &t, &l2), -EINPROGRESS);
        FP_CHECK_EQ_INT(fp_symcache_start(c, paths, 1, NULL, 0, 0, &t, &l3), -EINPROGRESS);
        fp_symcache_cancel(c, l2);
        fp_symcache_cancel(c, l3);
        fp_symcache_free(c);
        FP_CHECK(t == NULL);
}

/*
 * The tables of files a user's processes chose are that user's charge:
 * past the budget, the unheld ones are forgotten and a table that still
 * does not fit is refused; root's processes and other users are not
 * charged with them. Group-writable copies of prog, so none is trusted.
 */
static void test_user_budget(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *a = NULL, *b = NULL, *x = NULL;
        const char *pa, *pb, *pc, *pd;
        size_t one;

        FP_CHECK_EQ_INT(run("cd '%s' && for i in a b c d; do cp prog budget-$i && chmod 664 "
                            "budget-$i; done",
                            dir),
                        0);
        pa = in_dir("budget-a");
        pb = in_dir("budget-b");
        pc = in_dir("budget-c");
        pd = in_dir("budget-d");
        FP_CHECK_EQ_INT(fp_symcache_start(c, &pa, 1, NULL, 1000, -1, &a, NULL), 0);
        one = fp_symcache_charged(c, 1000);
        FP_CHECK(a && one == fp_symtab_bytes(a) && one > 0);
        fp_symcache_set_user_bytes(c, one + one / 2);
        /* a is held: b does not fit, and is not kept. */
        FP_CHECK_EQ_INT(fp_symcache_start(c, &pb, 1, NULL, 1000, -1, &b, NULL), -EDQUOT);
        FP_CHECK(b == NULL);
        FP_CHECK_EQ_INT(fp_symcache_charged(c, 1000), one);
        /* Another user, and root's processes, have budgets of their own (root: none). */
        FP_CHECK_EQ_INT(fp_symcache_start(c, &pb, 1, NULL, 1001, -1, &b, NULL), 0);
        FP_CHECK_EQ_INT(fp_symcache_charged(c, 1001), one);
        fp_symtab_unref(b);
        FP_CHECK_EQ_INT(fp_symcache_start(c, &pd, 1, NULL, 0, -1, &x, NULL), 0);
        FP_CHECK_EQ_INT(fp_symcache_charged(c, 0), 0);
        fp_symtab_unref(x);
        /* Once a is let go, c fits: a is forgotten. */
        fp_symtab_unref(a);
        x = NULL;
        FP_CHECK_EQ_INT(fp_symcache_start(c, &pc, 1, NULL, 1000, -1, &x, NULL), 0);
        FP_CHECK_EQ_INT(fp_symcache_charged(c, 1000), one);
        fp_symtab_unref(x);
        fp_symcache_free(c);
}

/*
 * A file of more than FP_SYM_MAX_SYMBOLS function symbols is not read
 * (the agent would hold gigabytes for it): an ELF object whose .symtab
 * holds one more, all named "f".
 */
static void test_too_many_symbols(void)
{
        const uint64_t nsyms = FP_SYM_MAX_SYMBOLS + 1ull;
        const char *path = in_dir("too-many.so");
        const char strtab[] = "\0f\0", shstrtab[] = "\0.text\0.symtab\0.strtab\0.shstrtab\0";
        const uint64_t code = 0x1000, sym_off = 0x2000, sym_size = (nsyms + 1) * sizeof(Elf64_Sym);
        const uint64_t str_off = sym_off + sym_size, shstr_off = str_off + sizeof(strtab);
        const uint64_t sh_off = (shstr_off + sizeof(shstrtab) + 7) & ~7ull;
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL;
        Elf64_Sym *chunk = calloc(65536, sizeof(*chunk));
        FILE *f = fopen(path, "w");
        Elf64_Ehdr eh = {.e_type = ET_DYN,
                         .e_machine = EM_X86_64,
                         .e_version = EV_CURRENT,
                         .e_phoff = sizeof(eh),
                         .e_shoff = sh_off,
                         .e_ehsize = sizeof(eh),
                         .e_phentsize = sizeof(Elf64_Phdr),
                         .e_phnum = 1,
                         .e_shentsize = sizeof(Elf64_Shdr),
                         .e_shnum = 5,
                         .e_shstrndx = 4};
        Elf64_Phdr ph = {.p_type = PT_LOAD,
                         .p_flags = PF_R | PF_X,
                         .p_filesz = code + 0x1000,
                         .p_memsz = code + 0x1000,
                         .p_align = 0x1000};
        Elf64_Shdr sh[5] = {
            {0},
            {.sh_name = 1,
             .sh_type = SHT_PROGBITS,
             .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
             .sh_addr = code,
             .sh_offset = code,
             .sh_size = 0x1000},
            {.sh_name = 7,
             .sh_type = SHT_SYMTAB,
             .sh_offset = sym_off,
             .sh_size = sym_size,
             .sh_link = 3,
             .sh_info = 1,
             .sh_entsize = sizeof(Elf64_Sym)},
            {.sh_name = 15, .sh_type = SHT_STRTAB, .sh_offset = str_off, .sh_size = sizeof(strtab)},
            {.sh_name = 23,
             .sh_type = SHT_STRTAB,
             .sh_offset = shstr_off,
             .sh_size = sizeof(shstrtab)},
        };

        FP_CHECK(f && chunk);
        if (!f || !chunk)
                goto out;
        memcpy(eh.e_ident, ELFMAG, SELFMAG);
        eh.e_ident[EI_CLASS] = ELFCLASS64;
        eh.e_ident[EI_DATA] = ELFDATA2LSB;
        eh.e_ident[EI_VERSION] = EV_CURRENT;
        fwrite(&eh, sizeof(eh), 1, f);
        fwrite(&ph, sizeof(ph), 1, f);
        fseek(f, (long)sym_off, SEEK_SET);
        fwrite(chunk, sizeof(*chunk), 1, f); /* the null symbol */
        for (uint64_t i = 0; i < nsyms; i += 65536) {
                size_t n = nsyms - i < 65536 ? (size_t)(nsyms - i) : 65536;

                for (size_t k = 0; k < n; k++)
                        chunk[k] = (Elf64_Sym){.st_name = 1,
                                               .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                                               .st_shndx = SHN_ABS,
                                               .st_value = 0x10000 + i + k,
                                               .st_size = 1};
                fwrite(chunk, sizeof(*chunk), n, f);
        }
        fwrite(strtab, sizeof(strtab), 1, f);
        fwrite(shstrtab, sizeof(shstrtab), 1, f);
        fseek(f, (long)sh_off, SEEK_SET);
        fwrite(sh, sizeof(sh), 1, f);
        FP_CHECK_EQ_INT(fclose(f), 0);
        f = NULL;
        FP_CHECK_EQ_INT(fp_symcache_get(c, path, NULL, &t), -E2BIG);
        FP_CHECK(t == NULL);
        FP_CHECK_EQ_INT(fp_symcache_n_files(c), 0);
        unlink(path);
out:
        if (f)
                fclose(f);
        free(chunk);
        fp_symcache_free(c);
}

static void test_debug_file(void)
{
        struct fp_symcache *c = fp_symcache_new(), *bare = fp_symcache_new();
        struct fp_symtab *t = NULL, *s = NULL;
        uint64_t addr = 0, size = 0;
        char bid[256];

        readelf_build_id(in_dir("prog"), bid);
        FP_CHECK(nm_lookup(in_dir("prog"), "fp_test_alpha", &addr, &size));

        /* Stripped, with its debug file: the symbols come back. */
        FP_CHECK_EQ_INT(fp_symcache_set_debug_dir(c, in_dir("debug")), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-stripped"), NULL, &t), 0);
        if (t) {
                FP_CHECK_EQ_STR(fp_symtab_build_id(t), bid);
                check_function(t, in_dir("prog"), "fp_test_alpha");
                check_function(t, in_dir("prog"), "fp_test_local");
        }

        /* Stripped, without: only .dynsym, which has none of them. */
        FP_CHECK_EQ_INT(fp_symcache_set_debug_dir(bare, NULL), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(bare, in_dir("prog-stripped"), NULL, &s), 0);
        if (s) {
                const char *n = fp_symtab_lookup(s, addr, NULL);

                FP_CHECK_EQ_STR(fp_symtab_build_id(s), bid);
                FP_CHECK(!n || strcmp(n, "fp_test_alpha") != 0);
                FP_CHECK(fp_symtab_n_symbols(s) < fp_symtab_n_symbols(t));
        }
        /*
         * The unstripped file of the same build, seen after the stripped one:
         * the cache upgrades to its full table; the old reference stays valid.
         */
        struct fp_symtab *full = NULL;
        size_t loaded = fp_symcache_n_loaded(bare);
        FP_CHECK_EQ_INT(fp_symcache_get(bare, in_dir("prog"), NULL, &full), 0);
        if (full && s) {
                FP_CHECK_EQ_STR(fp_symtab_build_id(full), bid);
                check_function(full, in_dir("prog"), "fp_test_local");
                FP_CHECK(fp_symtab_n_symbols(full) > fp_symtab_n_symbols(s));
                FP_CHECK_EQ_INT(fp_symcache_n_loaded(bare), loaded + 1);
                /* Now the stripped path also gets the full table. */
                struct fp_symtab *again = NULL;
                FP_CHECK_EQ_INT(fp_symcache_get(bare, in_dir("prog-stripped"), NULL, &again), 0);
                FP_CHECK(again == full);
                fp_symtab_unref(again);
        }
        fp_symtab_unref(full);
        fp_symtab_unref(t);
        fp_symtab_unref(s);
        fp_symcache_free(c);
        fp_symcache_free(bare);
}

/* Start of the vdso's .dynsym symbol name, walked from the in-memory image by hand. */
static bool vdso_symbol(const char *name, uint64_t *ret_value, uint64_t *ret_offset)
{
        const unsigned char *base = (const void *)getauxval(AT_SYSINFO_EHDR);
        const ElfW(Ehdr) *eh = (const void *)base;
        const ElfW(Shdr) * sh;
        const ElfW(Phdr) * ph;

        if (!base)
                return false;
        sh = (const void *)(base + eh->e_shoff);
        ph = (const void *)(base + eh->e_phoff);
        for (unsigned i = 0; i < eh->e_shnum; i++) {
                const ElfW(Sym) *syms = (const void *)(base + sh[i].sh_offset);
                const char *str;

                if (sh[i].sh_type != SHT_DYNSYM)
                        continue;
                str = (const char *)base + sh[sh[i].sh_link].sh_offset;
                for (size_t k = 0; k < sh[i].sh_size / sizeof(ElfW(Sym)); k++) {
                        if (strcmp(str + syms[k].st_name, name) != 0)
                                continue;
                        *ret_value = syms[k].st_value;
                        for (unsigned j = 0; j < eh->e_phnum; j++) {
                                if (ph[j].p_type != PT_LOAD)
                                        continue;
                                *ret_offset = syms[k].st_value - ph[j].p_vaddr + ph[j].p_offset;
                                return true;
                        }
                }
        }
        return false;
}

static void test_vdso(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL, *t2 = NULL;
        uint64_t value = 0, off = 0, vaddr = 0, start = 0;
        const char *n;

        if (!getauxval(AT_SYSINFO_EHDR)) {
                printf("# no vdso, skipped\n");
                fp_symcache_free(c);
                return;
        }
        FP_CHECK_EQ_INT(fp_symcache_get_vdso(c, &t), 0);
        FP_CHECK_EQ_INT(fp_symcache_get_vdso(c, &t2), 0);
        FP_CHECK(t && t == t2);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 1);
        fp_symtab_unref(t2);
        if (!t) {
                fp_symcache_free(c);
                return;
        }
        FP_CHECK(fp_symtab_n_symbols(t) > 0);
        FP_CHECK(vdso_symbol("__vdso_clock_gettime", &value, &off));
        /* Callers pass ip - start of [vdso], i.e. the offset in the image. */
        FP_CHECK_EQ_INT(fp_symtab_offset_to_vaddr(t, off + 1, &vaddr), 0);
        FP_CHECK_EQ_INT(vaddr, value + 1);
        n = fp_symtab_lookup(t, vaddr, &start);
        FP_CHECK(n && (strcmp(n, "__vdso_clock_gettime") == 0 || strcmp(n, "clock_gettime") == 0));
        FP_CHECK_EQ_INT(start, value);
        printf("# vdso: %zu symbols, build id '%s', __vdso_clock_gettime -> %s\n",
               fp_symtab_n_symbols(t), fp_symtab_build_id(t), n ? n : "(null)");
        fp_symtab_unref(t);
        fp_symcache_free(c);
}

static void test_kallsyms_file(void)
{
        struct fp_symtab *t = NULL;
        uint64_t start = 0, vaddr = 0;

        FP_CHECK_EQ_INT(fp_symtab_from_kallsyms(in_dir("kallsyms-hidden"), &t), -EACCES);
        FP_CHECK_EQ_INT(fp_symtab_from_kallsyms(in_dir("kallsyms-empty"), &t), -ENODATA);
        FP_CHECK_EQ_INT(fp_symtab_from_kallsyms(in_dir("missing"), &t), -ENOENT);
        FP_CHECK(t == NULL);
        FP_CHECK_EQ_INT(fp_symtab_from_kallsyms(in_dir("kallsyms-fake"), &t), 0);
        if (!t)
                return;
        FP_CHECK_EQ_INT(fp_symtab_n_symbols(t), 4);
        FP_CHECK_EQ_INT(fp_symtab_offset_to_vaddr(t, 0xffffffff81000123ull, &vaddr), 0);
        FP_CHECK_EQ_INT(vaddr, 0xffffffff81000123ull);
        FP_CHECK(fp_symtab_lookup(t, 0xffffffff80ffffffull, NULL) == NULL);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, 0xffffffff81000050ull, &start), "_text");
        FP_CHECK_EQ_INT(start, 0xffffffff81000000ull);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, 0xffffffff81000100ull, NULL), "local_fn");
        /* Data symbols are not functions: local_fn runs up to weak_fn. */
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, 0xffffffff810002ffull, NULL), "local_fn");
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, 0xffffffff81000300ull, NULL), "weak_fn");
        /* weak_fn would reach the module area; it is capped at 1 MiB. */
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, 0xffffffff810fffffull, NULL), "weak_fn");
        FP_CHECK(fp_symtab_lookup(t, 0xffffffff81100300ull, NULL) == NULL);
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, 0xffffffffc0001000ull, NULL), "mod_fn [mymod]");
        FP_CHECK_EQ_STR(fp_symtab_lookup(t, 0xffffffffc0001fffull, NULL), "mod_fn [mymod]");
        FP_CHECK(fp_symtab_lookup(t, 0xffffffffc0002000ull, NULL) == NULL);
        fp_symtab_unref(t);
}

/* A text symbol of /proc/kallsyms whose address no other text symbol shares. */
static bool unique_kernel_symbol(const char *want, uint64_t *ret_addr)
{
        char line[1024], name[512];
        uint64_t addr = 0;
        unsigned long long a;
        size_t same = 0;
        bool found = false;
        char type;
        FILE *f;

        for (int pass = 0; pass < 2; pass++) {
                f = fopen("/proc/kallsyms", "re");
                if (!f)
                        return false;
                while (fgets(line, sizeof(line), f)) {
                        if (sscanf(line, "%llx %c %511s", &a, &type, name) != 3 ||
                            !strchr("tTwW", type))
                                continue;
                        if (pass == 0 && !found && type == 'T' && strcmp(name, want) == 0) {
                                addr = a;
                                found = true;
                        } else if (pass == 1 && a == addr) {
                                same++;
                        }
                }
                fclose(f);
                if (!found)
                        return false;
        }
        *ret_addr = addr;
        return same == 1;
}

static void test_kernel(void)
{
        static const char *const candidates[] = {"schedule", "do_sys_open", "vfs_read",
                                                 "do_nanosleep", "ksys_write"};
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL, *t2 = NULL;
        uint64_t addr = 0, start = 0;
        const char *want = NULL;
        int r;

        r = fp_symcache_get_kernel(c, &t);
        if (r == -EACCES) {
                printf("# kallsyms addresses hidden (kptr_restrict), kernel lookup skipped\n");
                FP_CHECK(t == NULL);
                fp_symcache_free(c);
                return;
        }
        FP_CHECK_EQ_INT(r, 0);
        FP_CHECK_EQ_INT(fp_symcache_get_kernel(c, &t2), 0);
        FP_CHECK(t && t == t2);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 0);
        fp_symtab_unref(t2);
        for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && !want; i++)
                if (unique_kernel_symbol(candidates[i], &addr))
                        want = candidates[i];
        FP_CHECK(want != NULL);
        if (t && want) {
                FP_CHECK_EQ_STR(fp_symtab_lookup(t, addr, &start), want);
                FP_CHECK_EQ_INT(start, addr);
                FP_CHECK_EQ_STR(fp_symtab_lookup(t, addr + 1, NULL), want);
                printf("# kernel: %zu text symbols, build id '%s', %s at %#llx\n",
                       fp_symtab_n_symbols(t), fp_symtab_build_id(t), want,
                       (unsigned long long)addr);
        }
        fp_symtab_unref(t);
        fp_symcache_free(c);
}

static void test_errors(void)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL;

        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("notelf"), NULL, &t), -ENOEXEC);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("empty"), NULL, &t), -ENOEXEC);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog.c"), NULL, &t), -ENOEXEC);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("missing"), NULL, &t), -ENOENT);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("missing/x"), NULL, &t), -ENOENT);
        FP_CHECK_EQ_INT(fp_symcache_get(c, dir, NULL, &t), -EISDIR);
        /* A FIFO where a library was (a hostile target's trick): refused, never waited on. */
        FP_CHECK_EQ_INT(mkfifo(in_dir("fifo"), 0600), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("fifo"), NULL, &t), -ENOEXEC);
        FP_CHECK(t == NULL);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 0);
        /*
         * The file a process mapped and no other: a path it swapped for a
         * symlink to another file (or another file of the same name) is refused.
         */
        struct stat st;
        FP_CHECK_EQ_INT(stat(in_dir("prog"), &st), 0);
        struct fp_file_id mapped = {.dev = st.st_dev, .ino = st.st_ino};
        FP_CHECK_EQ_INT(symlink(in_dir("prog-copy"), in_dir("swapped")), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("swapped"), &mapped, &t), -ESTALE);
        FP_CHECK(t == NULL);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog-copy"), &mapped, &t), -ESTALE);
        FP_CHECK_EQ_INT(fp_symcache_n_loaded(c), 0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, in_dir("prog"), &mapped, &t), 0);
        FP_CHECK(t != NULL);
        fp_symtab_unref(t);
        t = NULL;
        FP_CHECK_EQ_INT(fp_symcache_get(NULL, in_dir("prog"), NULL, &t), -EINVAL);
        FP_CHECK(fp_symtab_lookup(NULL, 0x1000, NULL) == NULL);
        FP_CHECK_EQ_STR(fp_symtab_build_id(NULL), "");
        fp_symtab_unref(NULL);
        fp_symcache_free(NULL);
        fp_symcache_free(c);
}

/* The running libc, symbolized the way the agent does it: ip - map start + pgoff. */
static void test_own_libc(void)
{
        pid_t (*volatile fn)(void) = getpid;
        uint64_t ip = (uint64_t)(uintptr_t)fn, vaddr = 0;
        char line[1024], path[512] = "";
        unsigned long long start = 0, end, pgoff = 0;
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL;
        struct timespec t0, t1;
        const char *n;
        FILE *f = fopen("/proc/self/maps", "re");

        FP_CHECK(f != NULL);
        while (f && fgets(line, sizeof(line), f)) {
                char perms[8];
                int pos = 0;

                if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &pgoff,
                           &pos) >= 4 &&
                    pos > 0 && ip >= start && ip < end) {
                        snprintf(path, sizeof(path), "%s", line + pos);
                        path[strcspn(path, "\n")] = '\0';
                        break;
                }
        }
        if (f)
                fclose(f);
        if (!strstr(path, "libc")) {
                printf("# getpid is not in a mapped libc (%s), skipped\n", path);
                fp_symcache_free(c);
                return;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        FP_CHECK_EQ_INT(fp_symcache_get(c, path, NULL, &t), 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (t) {
                FP_CHECK_EQ_INT(fp_symtab_offset_to_vaddr(t, ip - start + pgoff, &vaddr), 0);
                n = fp_symtab_lookup(t, vaddr, NULL);
                FP_CHECK(n && strstr(n, "getpid"));
                printf("# %s: %zu symbols in %.1f ms, build id '%s', getpid -> %s\n", path,
                       fp_symtab_n_symbols(t),
                       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
                       fp_symtab_build_id(t), n ? n : "(null)");
                fp_symtab_unref(t);
        }
        fp_symcache_free(c);
}

int main(void)
{
        const char *tmp = getenv("TMPDIR");
        bool built;

        snprintf(dir, sizeof(dir), "%s/fp-test-symbols-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                fprintf(stderr, "Failed to create '%s': %s\n", dir, strerror(errno));
                return 1;
        }
        built = build_programs();
        FP_CHECK(built);
        if (built) {
                test_program();
                test_nested();
                test_cache();
                if (geteuid() == 0)
                        test_forged_build_id(); /* chown needs root */
                test_debug_file();
                test_eviction();
                test_loads();
                test_user_budget();
        }
        test_too_many_symbols();
        test_vdso();
        test_kallsyms_file();
        test_kernel();
        if (built)
                test_errors();
        test_own_libc();
        run("rm -rf '%s'", dir);
        return FP_TEST_DONE();
}
