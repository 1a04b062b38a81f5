/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the collector's reading of debug files
 * (collector/names/dsyms.c): every function of a PIE C program and a C++
 * program, looked up by file offset through the executable's program
 * headers and the debug file's symbols, is named as nm names it (C++
 * demangled, the symbol kept); another build's debug file, one cut short
 * and an executable's head without its program headers are refused; 200
 * scribbled copies of a debug file and of a head are refused or read,
 * never crash (run under ASan); the same read from memory, as uploads are
 * (an unstripped executable places its own offsets). test-debuginfod.sh
 * and test-debuginfo-upload.sh run the same through real servers.
 */
#include "dsyms.h"
#include "fp-test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

/* The first FP_DSYMS_HEAD_BYTES of dir/name into buf: the length. */
static size_t head_of(const char *name, uint8_t *buf)
{
        char path[512];
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = open(path, O_RDONLY);
        if (fd < 0)
                return 0;
        n = read(fd, buf, FP_DSYMS_HEAD_BYTES);
        close(fd);
        return n < 0 ? 0 : (size_t)n;
}

/* Loads dir/debug for the build of dir/exe: 0 with *ret, or -errno. */
static int load(const char *exe, const char *debug, const char *build_id, struct fp_dsyms **ret)
{
        static uint8_t head[FP_DSYMS_HEAD_BYTES];
        struct fp_dsyms_seg segs[FP_DSYMS_MAX_SEGS];
        char path[512], err[256];
        size_t len = head_of(exe, head);
        int n = fp_dsyms_segments(head, len, segs, FP_DSYMS_MAX_SEGS, err, sizeof(err));

        if (n < 0)
                return n;
        snprintf(path, sizeof(path), "%s/%s", dir, debug);
        return fp_dsyms_load(path, build_id, segs, (size_t)n, ret, err, sizeof(err));
}

static void read_line(const char *name, char *buf, size_t len)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        buf[0] = '\0';
        f = fopen(path, "r");
        if (f && fgets(buf, (int)len, f))
                buf[strcspn(buf, "\n")] = '\0';
        if (f)
                fclose(f);
}

/*
 * Every function nm lists of dir/prog (file offsets from its own program
 * headers in dir/prog.offs: "OFFSET SYMBOL DEMANGLED") named as listed.
 */
static void check_all(const char *prog, bool cxx)
{
        char id[256], name[512], path[512], line[4096];
        struct fp_dsyms *d = NULL;
        unsigned n = 0, wrong = 0;
        FILE *f;

        snprintf(name, sizeof(name), "%s.id", prog);
        read_line(name, id, sizeof(id));
        snprintf(name, sizeof(name), "%s.debug", prog);
        FP_CHECK_EQ_INT(load(prog, name, id, &d), 0);
        if (!d)
                return;
        snprintf(path, sizeof(path), "%s/%s.offs", dir, prog);
        f = fopen(path, "r");
        FP_CHECK(f != NULL);
        while (f && fgets(line, sizeof(line), f)) {
                unsigned long long off;
                char sym[1024], *dem;
                const char *sys, *got;

                if (sscanf(line, "%llx %1023s", &off, sym) != 2)
                        continue;
                dem = strchr(strchr(line, ' ') + 1, ' ') + 1;
                dem[strcspn(dem, "\n")] = '\0';
                got = fp_dsyms_name(d, off, &sys);
                n++;
                if (!got || strcmp(got, dem) != 0 ||
                    (strcmp(sym, dem) != 0 ? !sys || strcmp(sys, sym) != 0 : sys != NULL)) {
                        if (wrong++ < 5)
                                fprintf(stderr, "%s at 0x%llx: got '%s' (%s), want '%s' (%s)\n",
                                        prog, off, got ? got : "(none)", sys ? sys : "-", dem, sym);
                }
        }
        if (f)
                fclose(f);
        fprintf(stderr, "%s: %u functions, %u named wrongly\n", prog, n, wrong);
        FP_CHECK(n >= (cxx ? 4u : 3u));
        FP_CHECK_EQ_INT(wrong, 0);
        fp_dsyms_unref(d);
}

static void test_programs(void)
{
        /*
         * Each program: built with -g, its debug file split off, its build
         * ID, and nm's list of its functions with the file offset of each
         * (the vaddr less its segment's vaddr plus the segment's offset).
         */
        FP_CHECK_EQ_INT(
            fp_test_run(
                "cd '%s' && "
                "printf 'static int __attribute__((noinline)) f(int x){return x*3;}\\n"
                "int g(int x){return f(x)+1;} int main(int c, char **v){(void)v; return g(c);}\\n'"
                " > c.c && cc -O1 -g -fPIE -pie -o cprog c.c && "
                "printf 'namespace n { template <class T> struct S { __attribute__((noinline)) T "
                "m(T x){return x*2;} }; __attribute__((noinline)) int o(int x){return x+1;}\\n"
                "__attribute__((noinline)) double o(double x){return x+1;} }\\n"
                "int main(int c, char **){ n::S<long> s; return (int)(s.m(c) + n::o(c) + "
                "n::o(1.0*c)); }\\n' > x.cc && c++ -O1 -g -o xprog x.cc && "
                "for p in cprog xprog; do "
                "objcopy --only-keep-debug $p $p.debug && "
                "readelf -n $p | awk '/Build ID/ {print $3}' > $p.id && "
                "readelf -lW $p | awk '$1 == \"LOAD\" {print $2, $3, $5}' > $p.segs && "
                "readelf -sW $p | awk '$4 == \"FUNC\" && $7 != \"UND\" {print $2, $8}' | sort -u | "
                "while read a s; do a=$((0x$a)); "
                "  while read so sv sf; do "
                "    if [ $a -ge $(($sv)) ] && [ $a -lt $(($sv + $sf)) ]; then "
                "      printf '%%x %%s %%s\\n' $(($a - $sv + $so)) $s \"$(echo $s | c++filt)\"; "
                "      break; fi; "
                "  done < $p.segs; "
                "done > $p.offs; done",
                dir),
            0);
        check_all("cprog", false);
        check_all("xprog", true);
}

static void test_refused(void)
{
        static uint8_t head[FP_DSYMS_HEAD_BYTES];
        struct fp_dsyms_seg segs[FP_DSYMS_MAX_SEGS];
        struct fp_dsyms *d = NULL;
        char id[256], err[256];
        size_t len;

        read_line("cprog.id", id, sizeof(id));
        /* Another build's debug file. */
        FP_CHECK_EQ_INT(load("cprog", "xprog.debug", id, &d), -EBADMSG);
        /* Cut short, and not ELF at all. */
        FP_CHECK_EQ_INT(fp_test_run("cd '%s' && head -c 3000 cprog.debug > cut.debug && "
                                    "head -c 5000 /dev/urandom > junk.debug && "
                                    "head -c 100 cprog > short.head",
                                    dir),
                        0);
        FP_CHECK(load("cprog", "cut.debug", id, &d) < 0);
        FP_CHECK_EQ_INT(load("cprog", "junk.debug", id, &d), -EBADMSG);
        /* A head that ends before its program headers. */
        len = head_of("short.head", head);
        FP_CHECK_EQ_INT(fp_dsyms_segments(head, len, segs, FP_DSYMS_MAX_SEGS, err, sizeof(err)),
                        -EBADMSG);
        FP_CHECK(strstr(err, "program headers") != NULL);
        FP_CHECK(d == NULL);
}

/* Copies dir/from to dir/to with 8 bytes at random places set at random. */
static void scribble(const char *from, const char *to)
{
        static uint8_t buf[1 << 20];
        char path[512];
        size_t n;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, from);
        f = fopen(path, "rb");
        n = f ? fread(buf, 1, sizeof(buf), f) : 0;
        if (f)
                fclose(f);
        FP_CHECK(n > 0 && n < sizeof(buf));
        for (int k = 0; n && k < 8; k++)
                buf[(size_t)rand() % n] = (uint8_t)rand();
        snprintf(path, sizeof(path), "%s/%s", dir, to);
        f = fopen(path, "wb");
        FP_CHECK(f && fwrite(buf, 1, n, f) == n);
        if (f)
                fclose(f);
}

/* 200 copies of the debug file and of the head with bytes scribbled over. */
static void test_scribbled(void)
{
        static uint8_t head[FP_DSYMS_HEAD_BYTES], copy[FP_DSYMS_HEAD_BYTES];
        struct fp_dsyms_seg segs[FP_DSYMS_MAX_SEGS];
        char id[256], err[256];
        size_t len = head_of("xprog", head);
        unsigned loaded = 0, refused = 0;

        read_line("xprog.id", id, sizeof(id));
        srand(7);
        for (int i = 0; i < 200; i++) {
                struct fp_dsyms *d = NULL;
                const char *sys;
                int r;

                memcpy(copy, head, len);
                for (int k = 0; k < 8; k++)
                        copy[rand() % 256] = (uint8_t)rand();
                r = fp_dsyms_segments(copy, len, segs, FP_DSYMS_MAX_SEGS, err, sizeof(err));
                FP_CHECK(r == -EBADMSG || (r > 0 && r <= (int)FP_DSYMS_MAX_SEGS));
                scribble("xprog.debug", "s.debug");
                char path[512];
                snprintf(path, sizeof(path), "%s/s.debug", dir);
                r = fp_dsyms_load(path, id, segs, r > 0 ? (size_t)r : 0, &d, err, sizeof(err));
                if (r == 0) {
                        for (uint64_t off = 0; off < 0x3000; off += 7)
                                fp_dsyms_name(d, off, &sys);
                        fp_dsyms_unref(d);
                        loaded++;
                } else {
                        FP_CHECK(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                        FP_CHECK(err[0] != '\0');
                        if (refused++ == 0)
                                fprintf(stderr, "first refusal: %s\n", err);
                }
        }
        fprintf(stderr, "scribbled: %u read, %u refused\n", loaded, refused);
        FP_CHECK_EQ_INT(loaded + refused, 200);
}

/* dir/name's bytes (malloc'd) and length; NULL when it cannot be read. */
static uint8_t *slurp(const char *name, size_t *len)
{
        char path[512];
        uint8_t *p = NULL;
        long n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "rb");
        if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
            (p = malloc((size_t)n)) && fread(p, 1, (size_t)n, f) != (size_t)n) {
                free(p);
                p = NULL;
        }
        if (f)
                fclose(f);
        *len = p ? (size_t)n : 0;
        return p;
}

/*
 * Uploads, read from memory (fp_dsyms_inspect(), fp_dsyms_load_mem()): an
 * unstripped executable is one (its own program headers place its
 * offsets), a debug file is not (named by ELF address only); a file cut
 * short, one that is not ELF and a stripped one are refused with why; 200
 * scribbled copies are refused or read, never crash.
 */
static void test_uploads(void)
{
        char id[256], got[FP_DSYMS_ID_HEX], err[256], line[4096], path[512];
        struct fp_dsyms *d = NULL;
        size_t len, n = 0, wrong = 0;
        uint8_t *data;
        bool exec = true;
        FILE *f;

        read_line("cprog.id", id, sizeof(id));
        FP_CHECK_EQ_INT(fp_test_run("cd '%s' && strip -s -o cprog.stripped cprog", dir), 0);
        /* The executable: named by file offset, every function as nm names it. */
        data = slurp("cprog", &len);
        FP_CHECK(data != NULL);
        FP_CHECK_EQ_INT(fp_dsyms_inspect(data, len, got, &exec, err, sizeof(err)), 0);
        FP_CHECK(exec);
        FP_CHECK_EQ_STR(got, id);
        FP_CHECK_EQ_INT(fp_dsyms_load_mem(data, len, id, &d, err, sizeof(err)), 0);
        free(data);
        snprintf(path, sizeof(path), "%s/cprog.offs", dir);
        f = fopen(path, "r");
        while (d && f && fgets(line, sizeof(line), f)) {
                unsigned long long off;
                char sym[1024];
                const char *sys, *name;

                if (sscanf(line, "%llx %1023s", &off, sym) != 2)
                        continue;
                name = fp_dsyms_name(d, off, &sys);
                n++;
                wrong += !name || strcmp(name, sym) != 0;
        }
        if (f)
                fclose(f);
        FP_CHECK(n >= 3);
        FP_CHECK_EQ_INT(wrong, 0);
        fp_dsyms_unref(d);
        d = NULL;
        /* The debug file: no segments of its own; by ELF address it names. */
        data = slurp("cprog.debug", &len);
        FP_CHECK_EQ_INT(fp_dsyms_inspect(data, len, got, &exec, err, sizeof(err)), 0);
        FP_CHECK(!exec);
        FP_CHECK_EQ_INT(fp_dsyms_load_mem(data, len, id, &d, err, sizeof(err)), 0);
        const char *sys;
        FP_CHECK(d && fp_dsyms_name(d, 0x1100, &sys) == NULL);
        fp_dsyms_unref(d);
        /* Scribbled copies of it. */
        srand(11);
        for (int i = 0; data && i < 200; i++) {
                uint8_t *c = malloc(len);
                int r;

                FP_CHECK(c != NULL);
                if (!c)
                        break;
                memcpy(c, data, len);
                for (int k = 0; k < 8; k++)
                        c[(size_t)rand() % len] = (uint8_t)rand();
                r = fp_dsyms_inspect(c, len, got, &exec, err, sizeof(err));
                FP_CHECK(r == 0 || (r == -EBADMSG && err[0]));
                d = NULL;
                r = fp_dsyms_load_mem(c, len, id, &d, err, sizeof(err));
                FP_CHECK(r == 0 || r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                fp_dsyms_unref(d);
                free(c);
        }
        free(data);
        /* Refused, each with why. */
        static const struct {
                const char *file, *why;
        } bad[] = {
            {"cut.debug", "cut short"},
            {"junk.debug", "not an ELF file"},
            {"cprog.stripped", "no symbol table"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                data = slurp(bad[i].file, &len);
                FP_CHECK(data != NULL);
                err[0] = 0;
                FP_CHECK_EQ_INT(fp_dsyms_inspect(data, len, got, &exec, err, sizeof(err)),
                                -EBADMSG);
                if (!strstr(err, bad[i].why))
                        fprintf(stderr, "%s: '%s', want '%s'\n", bad[i].file, err, bad[i].why);
                FP_CHECK(strstr(err, bad[i].why) != NULL);
                free(data);
        }
}

int main(void)
{
        const char *tmp = getenv("TMPDIR");

        snprintf(dir, sizeof(dir), "%s/fp-test-dsyms-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                fprintf(stderr, "Failed to create '%s': %s\n", dir, strerror(errno));
                return 1;
        }
        test_programs();
        test_refused();
        test_scribbled();
        test_uploads();
        fp_test_run("rm -rf '%s'", dir);
        return FP_TEST_DONE();
}
