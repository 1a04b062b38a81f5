/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of PLT entry names (agent/stacks/plt.c, through the symbol
 * tables of symbols.c): every `func@plt` label objdump puts on a file's
 * .plt, .plt.sec and .plt.got is the name the symtab gives that address,
 * and the entry's last byte too; an entry objdump calls `*ABS*+0x...@plt`
 * (a call through an IRELATIVE slot) is named by its IFUNC. The files: programs compiled here with
 * a classic lazy PLT, with IBT stubs (-fcf-protection, -z ibtplt, .plt.sec) and with -z now;
 * Debian's libsqlite3 (1,200 PLT entries, its own exported functions among them) and libc. A
 * hostile file whose PLT jumps point nowhere, or at bytes past its sections, names nothing there
 * and loads.
 */
#include "symbols.h"
#include "fp-test.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

static const char lib_c[] = "int plt_lib_one(int x) { return x + 1; }\n"
                            "int plt_lib_two(int x) { return plt_lib_one(x) * 2; }\n";
static const char prog_c[] = "int plt_lib_one(int); int plt_lib_two(int);\n"
                             "int main(int argc, char **argv) { (void)argv;\n"
                             "  return plt_lib_one(argc) + plt_lib_two(argc); }\n";

static bool write_file(const char *name, const char *text)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        if (!f)
                return false;
        fputs(text, f);
        return fclose(f) == 0;
}

/*
 * Checks path's symtab against objdump's PLT labels; returns how many
 * entries it compared (0 when objdump or the file is missing).
 */
static size_t check_file(struct fp_symcache *c, const char *path)
{
        char cmd[1024], line[1024];
        struct fp_symtab *t = NULL;
        size_t n = 0, bad = 0, ifuncs = 0;

        if (access(path, R_OK) != 0)
                return 0;
        FP_CHECK_EQ_INT(fp_symcache_get(c, path, NULL, &t), 0);
        if (!t)
                return 0;
        snprintf(cmd, sizeof(cmd),
                 "objdump -d -j .plt -j .plt.sec -j .plt.got '%s' 2>/dev/null | "
                 "grep -E '^[0-9a-f]+ <.*@plt>:$|^Disassembly of section'",
                 path);
        FILE *p = popen(cmd, "r");
        FP_CHECK(p != NULL);
        uint64_t entry_size = 16;
        while (p && fgets(line, sizeof(line), p)) {
                /* .plt.got's entries are 8 bytes without IBT, 16 with; the others 16. */
                if (strncmp(line, "Disassembly", 11) == 0) {
                        entry_size = strstr(line, ".plt.got") ? 8 : 16;
                        continue;
                }
                char *lt = strchr(line, '<'), *gt = strrchr(line, '>');
                uint64_t addr = strtoull(line, NULL, 16);
                if (!lt || !gt || gt <= lt)
                        continue;
                *gt = '\0';
                const char *want = lt + 1;
                const char *got = fp_symtab_lookup(t, addr, NULL);
                /* objdump's name for a call to an IFUNC by IRELATIVE slot; ours is the IFUNC's. */
                if (strncmp(want, "*ABS*", 5) == 0) {
                        size_t len = got ? strlen(got) : 0;
                        if (len < 5 || strcmp(got + len - 4, "@plt") != 0)
                                bad++, fprintf(stderr, "%s: 0x%" PRIx64 " (%s) is named %s\n", path,
                                               addr, want, got ? got : "(none)");
                        else if (ifuncs++ < 2)
                                printf("# %s: %s is %s\n", path, want, got);
                        continue;
                }
                const char *last = fp_symtab_lookup(t, addr + entry_size - 1, NULL);
                n++;
                if (!got || strcmp(got, want) != 0 || !last || strcmp(last, want) != 0) {
                        if (bad++ < 5)
                                fprintf(stderr,
                                        "%s: 0x%" PRIx64 " is %s, named %s (last byte %s)\n", path,
                                        addr, want, got ? got : "(none)", last ? last : "(none)");
                }
        }
        if (p)
                pclose(p);
        FP_CHECK_EQ_INT((int)bad, 0);
        printf("# %s: %zu PLT entries named as objdump names them, %zu not\n", path, n, bad);
        fp_symtab_unref(t);
        return n;
}

static void test_built(struct fp_symcache *c)
{
        static const struct {
                const char *name, *flags;
        } builds[] = {
            {"lazy", ""},
            {"now", "-Wl,-z,now"},
            {"ibt", "-fcf-protection=full -Wl,-z,ibtplt"},
        };
        char path[512];

        FP_CHECK(write_file("lib.c", lib_c) && write_file("prog.c", prog_c));
        for (size_t i = 0; i < sizeof(builds) / sizeof(builds[0]); i++) {
                const char *b = builds[i].name, *fl = builds[i].flags;
                if (fp_test_run("cd '%s' && cc -O2 -fPIC -shared %s -o lib-%s.so lib.c && "
                                "cc -O2 %s -o prog-%s prog.c ./lib-%s.so",
                                dir, fl, b, fl, b, b) != 0) {
                        FP_CHECK(false);
                        continue;
                }
                snprintf(path, sizeof(path), "%s/prog-%s", dir, b);
                FP_CHECK(check_file(c, path) >= 2);
                /* The library calls its own exported function through its PLT. */
                snprintf(path, sizeof(path), "%s/lib-%s.so", dir, b);
                FP_CHECK(check_file(c, path) >= 1);
        }
}

static void test_system(struct fp_symcache *c)
{
        size_t n = check_file(c, "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0");
        if (n == 0)
                printf("# libsqlite3.so.0 not installed, skipped\n");
        else
                FP_CHECK(n >= 100);
        (void)check_file(c, "/usr/lib/x86_64-linux-gnu/libc.so.6");
}

/* A PLT whose jumps lead outside every section, or into the middle of .dynsym: no names, no harm.
 */
static void test_hostile(struct fp_symcache *c)
{
        char path[512];
        struct fp_symtab *t = NULL;

        if (fp_test_run(
                "cd '%s' && cc -O2 -o hostile prog.c ./lib-lazy.so && "
                "off=$(readelf -SW hostile | sed 's/^.*\\] //' | awk '$1 == \".plt\" {print $4}') "
                "&& "
                "size=$(readelf -SW hostile | sed 's/^.*\\] //' | awk '$1 == \".plt\" {print $5}') "
                "&& "
                "python3 -c 'import sys, random\n"
                "f = open(sys.argv[1], \"r+b\"); off = int(sys.argv[2], 16); n = int(sys.argv[3], "
                "16)\n"
                "random.seed(7); f.seek(off)\n"
                "f.write(bytes(random.choice([0xff, 0x25, 0x68, 0xf2, 0xf3, 0x0f, 0x1e, 0xfa, "
                "0x7f, "
                "0x80]) for _ in range(n)))' hostile $off $size",
                dir) != 0) {
                FP_CHECK(false);
                return;
        }
        snprintf(path, sizeof(path), "%s/hostile", dir);
        FP_CHECK_EQ_INT(fp_symcache_get(c, path, NULL, &t), 0);
        FP_CHECK(t != NULL);
        if (t) {
                FP_CHECK(fp_symtab_n_symbols(t) > 0);
                fp_symtab_unref(t);
        }
}

int main(void)
{
        const char *tmp = getenv("TMPDIR");
        struct fp_symcache *c;

        snprintf(dir, sizeof(dir), "%s/fp-test-plt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                fprintf(stderr, "Failed to create '%s': %s\n", dir, strerror(errno));
                return 1;
        }
        c = fp_symcache_new();
        FP_CHECK(c != NULL);
        if (c) {
                test_built(c);
                test_system(c);
                test_hostile(c);
                fp_symcache_free(c);
        }
        fp_test_run("rm -rf '%s'", dir);
        return FP_TEST_DONE();
}
