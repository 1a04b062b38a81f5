/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the search for a stripped binary's names
 * (agent/stacks/debugfile.c) on hostile input: MiniDebugInfo sections that
 * are not xz, xz that is not an ELF file, and an xz bomb past
 * FP_DEBUG_MINI_MAX are refused (0, the binary keeps its own names) while
 * a good one opens; a .gnu_debuglink naming "../x" or a file of another
 * build or with another CRC is not followed, and one naming the right file
 * is. (test-debuginfo.sh runs the same with the real agent.)
 */
#include "debugfile.h"
#include "elfread.h"
#include "fp-test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

/* fp_debug_minidebuginfo() of dir/name: 1 (with an ELF), 0 or -errno. */
static int mini_of(const char *name)
{
        char path[512];
        int fd;
        Elf *elf;
        struct fp_debug_elf d = {.fd = -1};

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int r = fp_elf_open(path, &fd, &elf, NULL);
        if (r < 0)
                return r;
        r = fp_debug_minidebuginfo(elf, &d);
        if (r > 0 && elf_kind(d.elf) != ELF_K_ELF)
                r = -EINVAL;
        fp_debug_close(&d);
        elf_end(elf);
        close(fd);
        return r;
}

/* fp_debug_find() for dir/name: 1 and the source, 0, or -errno. */
static int find_of(const char *name, enum fp_sym_source *src)
{
        char path[512], bid[FP_ELF_BUILD_ID_HEX];
        int fd;
        Elf *elf;
        struct fp_debug_elf d = {.fd = -1};

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int r = fp_elf_open(path, &fd, &elf, NULL);
        if (r < 0)
                return r;
        fp_elf_build_id(elf, bid);
        r = fp_debug_find(path, elf, bid, NULL, getuid(), &d, src);
        fp_debug_close(&d);
        elf_end(elf);
        close(fd);
        return r;
}

static void test_minidebuginfo(void)
{
        FP_CHECK_EQ_INT(
            fp_test_run(
                "cd '%s' && printf 'static int f(int x){return x+1;} int main(int c, char **v)"
                "{(void)v; return f(c);}\\n' > p.c && cc -O1 -o p p.c && cp p good && "
                "objcopy --only-keep-debug p p.dbg && xz -kf p.dbg && "
                "objcopy --add-section .gnu_debugdata=p.dbg.xz good && "
                "head -c 4096 /dev/urandom > junk && cp p notxz && "
                "objcopy --add-section .gnu_debugdata=junk notxz && "
                "xz -c junk > junk.xz && cp p notelf && "
                "objcopy --add-section .gnu_debugdata=junk.xz notelf && "
                "head -c 100000000 /dev/zero | xz -c > bomb.xz && cp p bomb && "
                "objcopy --add-section .gnu_debugdata=bomb.xz bomb && "
                "head -c $(($(stat -c %%s p.dbg.xz) / 2)) p.dbg.xz > cut.xz && cp p cut && "
                "objcopy --add-section .gnu_debugdata=cut.xz cut",
                dir),
            0);
        FP_CHECK_EQ_INT(mini_of("good"), 1);
        FP_CHECK_EQ_INT(mini_of("p"), 0);      /* none */
        FP_CHECK_EQ_INT(mini_of("notxz"), 0);  /* not xz */
        FP_CHECK_EQ_INT(mini_of("notelf"), 0); /* xz, not an ELF file */
        FP_CHECK_EQ_INT(mini_of("bomb"), 0);   /* 100 MB of zeros: past the bound */
        FP_CHECK_EQ_INT(mini_of("cut"), 0);    /* a stream cut short */
}

static void test_debuglink(void)
{
        enum fp_sym_source src = FP_SYM_SOURCE_DYNSYM;

        FP_CHECK_EQ_INT(
            fp_test_run(
                "cd '%s' && mkdir -p sub/.debug && cc -O1 -Wl,--build-id -o sub/a p.c && "
                "objcopy --only-keep-debug sub/a sub/.debug/a.dbg && "
                "strip -o sub/a.s sub/a && objcopy --add-gnu-debuglink=sub/.debug/a.dbg sub/a.s && "
                "cc -O2 -Wl,--build-id -o sub/b p.c && "
                "objcopy --only-keep-debug sub/b sub/b.dbg && "
                "printf 'int main(void){return 7;}\\n' > q.c && cc -O1 -Wl,--build-id -o sub/b2 "
                "q.c && "
                "objcopy --only-keep-debug sub/b2 sub/b2.dbg && "
                "strip -o sub/b.s sub/b && objcopy --add-gnu-debuglink=sub/b2.dbg sub/b.s && "
                "cp sub/b2.dbg sub/b.dbg.other && "
                "cc -O1 -Wl,--build-id=none -o sub/c p.c && objcopy --only-keep-debug sub/c "
                "sub/c.dbg && "
                "strip -o sub/c.s sub/c && objcopy --add-gnu-debuglink=sub/c.dbg sub/c.s && "
                "cc -O1 -Wl,--build-id=none -o sub/d p.c && objcopy --only-keep-debug sub/d "
                "sub/d.dbg && "
                "strip -o sub/d.s sub/d && objcopy --add-gnu-debuglink=sub/d.dbg sub/d.s && "
                "printf 'tampered' >> sub/d.dbg",
                dir),
            0);
        /* Found in the binary's .debug/ by build ID. */
        FP_CHECK_EQ_INT(find_of("sub/a.s", &src), 1);
        FP_CHECK_EQ_INT((int)src, FP_SYM_SOURCE_DEBUGLINK);
        /* The linked file is another build's. */
        FP_CHECK_EQ_INT(find_of("sub/b.s", &src), 0);
        /* No build ID: the CRC decides, right and wrong. */
        FP_CHECK_EQ_INT(find_of("sub/c.s", &src), 1);
        FP_CHECK_EQ_INT(find_of("sub/d.s", &src), 0);
        /* A link name that would leave the folders searched is not followed. */
        FP_CHECK_EQ_INT(
            fp_test_run("cd '%s' && cp sub/a.s sub/e.s && objcopy --remove-section "
                        ".gnu_debuglink sub/e.s && printf '../a.dbg\\0\\0\\0\\0\\0\\0\\0\\0' > "
                        "link && objcopy --add-section .gnu_debuglink=link sub/e.s && "
                        "cp sub/.debug/a.dbg a.dbg",
                        dir),
            0);
        FP_CHECK_EQ_INT(find_of("sub/e.s", &src), 0);
}

int main(void)
{
        const char *tmp = getenv("TMPDIR");

        elf_version(EV_CURRENT);
        snprintf(dir, sizeof(dir), "%s/fp-test-debugfile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                fprintf(stderr, "Failed to create '%s': %s\n", dir, strerror(errno));
                return 1;
        }
        test_minidebuginfo();
        test_debuglink();
        fp_test_run("rm -rf '%s'", dir);
        return FP_TEST_DONE();
}
