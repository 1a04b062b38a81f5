/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of interpreted Java methods' names (agent/runtimes/hotspot/hotspot.c):
 * JVM signatures written as the perf map writes a method, malformed ones
 * refused; a library that is not libjvm.so refused in one line; and, with
 * a real JVM (Debian's OpenJDK, when installed), its VMStructs read and
 * Method* values that are no method's (zero, unmapped, its own code, a
 * page of its stack) giving no name, each tried once. Test-java names
 * real interpreted methods through the agent.
 */
#include "hotspot.h"
#include "fp-test.h"

#include <libelf.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void format_is(const char *cls, const char *name, const char *sig, const char *want)
{
        char out[FP_HOTSPOT_MAX_NAME];
        bool ok = fp_hotspot_format(cls, name, sig, out, sizeof(out));

        if (want) {
                FP_CHECK(ok);
                FP_CHECK_EQ_STR(out, want);
        } else {
                FP_CHECK(!ok);
                FP_CHECK_EQ_STR(out, "");
        }
}

/* The first mapping of a file named name in pid's maps: its path, start and offset. */
static bool find_mapping(pid_t pid, const char *name, char *path, size_t len, uint64_t *start,
                         uint64_t *pgoff)
{
        char file[64], line[4096];
        FILE *f;
        bool found = false;

        snprintf(file, sizeof(file), "/proc/%d/maps", (int)pid);
        if (!(f = fopen(file, "re")))
                return false;
        while (!found && fgets(line, sizeof(line), f)) {
                unsigned long long s, e, off;
                char perms[8], p[4096] = "";
                if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095s", &s, &e, perms, &off, p) ==
                        5 &&
                    strstr(p, name)) {
                        snprintf(path, len, "%s", p);
                        *start = s;
                        *pgoff = off;
                        found = true;
                }
        }
        fclose(f);
        return found;
}

/* The frame upto bytes into prologue p: cfa and the rbp slot (0: not saved), or refused (cfa 0). */
static void prologue_is(const uint8_t *p, size_t n, size_t upto, uint32_t cfa, int32_t rbp_off)
{
        struct fp_hotspot_code r = {0};
        bool ok = fp_hotspot_prologue(p, n, upto, &r);

        if (!cfa) {
                FP_CHECK(!ok);
                return;
        }
        FP_CHECK(ok);
        FP_CHECK_EQ_INT((int)r.cfa, (int)cfa);
        FP_CHECK_EQ_INT(r.rbp_saved ? r.rbp_off : 0, rbp_off);
}

/*
 * Prologues as OpenJDK 17's compilers emit them (read from a live JVM's
 * code cache): C2 without a stack bang (sub rsp; mov [rsp+0x20],rbp), C1
 * with one (mov [rsp-0x14000],eax; push rbp; sub rsp,0x30), and with
 * -XX:+PreserveFramePointer (push rbp; mov rbp,rsp; sub rsp).
 */
static void prologues(void)
{
        static const uint8_t c2[] = {0x48, 0x81, 0xec, 0x28, 0x00, 0x00, 0x00,
                                     0x48, 0x89, 0x6c, 0x24, 0x20, 0x85, 0xf6};
        static const uint8_t c1[] = {0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff,
                                     0x55, 0x48, 0x83, 0xec, 0x30, 0x48, 0xbf};
        static const uint8_t pfp[] = {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55, 0x48,
                                      0x8b, 0xec, 0x48, 0x83, 0xec, 0x10, 0x90};
        static const uint8_t other[] = {0xe8, 0x3b, 0xf0, 0x75, 0x15, 0x55};

        prologue_is(c2, sizeof(c2), 0, 8, 0);  /* at the entry: nothing pushed */
        prologue_is(c2, sizeof(c2), 7, 48, 0); /* after sub rsp,0x28 */
        prologue_is(c2, sizeof(c2), 12, 48, -16);
        prologue_is(c2, sizeof(c2), 3, 0, 0); /* inside an instruction */
        prologue_is(c1, sizeof(c1), 7, 8, 0); /* after the stack bang */
        prologue_is(c1, sizeof(c1), 8, 16, -16);
        prologue_is(c1, sizeof(c1), 12, 64, -16);
        prologue_is(c1, sizeof(c1), 14, 0, 0);  /* past the prologue: movabs */
        prologue_is(pfp, sizeof(pfp), 6, 8, 0); /* a nop */
        prologue_is(pfp, sizeof(pfp), 10, 16, -16);
        prologue_is(pfp, sizeof(pfp), 14, 32, -16);
        prologue_is(pfp, sizeof(pfp), 15, 32, -16);
        prologue_is(other, sizeof(other), 0, 8, 0);
        prologue_is(other, sizeof(other), 6, 0, 0); /* a call: not a prologue's */
}

/*
 * The live JVM's code cache: every 4 KiB of its code heaps looked up; what
 * is found holds the address, the interpreter is among it, and addresses
 * outside the heaps find nothing.
 */
static void code_cache(struct fp_hotspot *h, uint64_t junk)
{
        uint64_t low[8], high[8];
        size_t n = 0, found = 0, interpreter = 0;
        struct fp_hotspot_code c;

        /*
         * (A JVM just started may not have set its heaps up, nor generated its
         * interpreter yet: looked at again, for 10 s at most.)
         */
        for (int round = 0; round < 100 && !interpreter; round++) {
                if (round)
                        usleep(100000);
                if (!fp_hotspot_code_ok(h))
                        continue;
                n = fp_hotspot_code_heaps(h, low, high, 8);
                found = 0;
                for (size_t i = 0; i < n && i < 8; i++)
                        for (uint64_t pc = low[i]; pc < high[i]; pc += 4096) {
                                int r = fp_hotspot_code_at(h, pc, true, &c);
                                FP_CHECK(r == 0 || r == 1);
                                if (r != 1)
                                        continue;
                                found++;
                                FP_CHECK(c.compiled || c.name != NULL);
                                if (!c.compiled && strcmp(c.name, "Interpreter") == 0) {
                                        interpreter++;
                                        FP_CHECK(c.frame == FP_HOTSPOT_FRAME_RBP);
                                }
                                if (c.compiled)
                                        FP_CHECK(c.n_methods >= 1 && c.methods[c.n_methods - 1]);
                        }
        }
        FP_CHECK(n >= 1);
        FP_CHECK(fp_hotspot_code_ok(h));
        FP_CHECK_EQ_STR(fp_hotspot_code_why(h), "");
        printf("# the code cache: %zu heaps, %zu addresses in blobs, %zu in the interpreter\n", n,
               found, interpreter);
        FP_CHECK(found >= 1 && interpreter >= 1);
        FP_CHECK_EQ_INT(fp_hotspot_code_at(h, 0, true, &c), 0);
        FP_CHECK_EQ_INT(fp_hotspot_code_at(h, junk, false, &c), 0);
        FP_CHECK_EQ_INT(fp_hotspot_code_at(h, UINT64_MAX - 7, false, &c), 0);
        struct fp_hotspot_code_stats st;
        fp_hotspot_code_stats(h, &st);
        FP_CHECK(st.lookups >= found + 3 && st.blobs_read >= 1 && st.scopes_failed == 0);
}

int main(void)
{
        char why[256] = "";
        struct fp_hotspot *h = NULL;
        char path[4096];
        uint64_t start, pgoff;

        elf_version(EV_CURRENT);
        prologues();
        format_is("Shares", "alpha", "()V", "void Shares.alpha()");
        format_is("Shares", "work", "(I)J", "long Shares.work(int)");
        format_is("java.util.HashMap", "merge",
                  "(Ljava/lang/Object;Ljava/lang/Object;Ljava/util/function/BiFunction;)"
                  "Ljava/lang/Object;",
                  "java.lang.Object java.util.HashMap.merge(java.lang.Object, java.lang.Object, "
                  "java.util.function.BiFunction)");
        format_is("Shares", "main", "([Ljava/lang/String;)V",
                  "void Shares.main(java.lang.String[])");
        format_is("A", "m", "([[BZCDFS)[[I",
                  "int[][] A.m(byte[][], boolean, char, double, float, short)");
        /* Not signatures: no parentheses, a bad type, a void parameter or array, junk after. */
        format_is("A", "m", "V", NULL);
        format_is("A", "m", "(Q)V", NULL);
        format_is("A", "m", "(V)V", NULL);
        format_is("A", "m", "()[V", NULL);
        format_is("A", "m", "()VV", NULL);
        format_is("A", "m", "(Ljava/lang/String)V", NULL);
        format_is("A", "m", "(L;)V", NULL);
        format_is("A", "m", "(", NULL);
        /* Too long for the buffer: refused, not cut. */
        char big[2048] = "(";
        for (int i = 0; i < 300; i++)
                strcat(big, "J");
        strcat(big, ")V");
        format_is("A", "m", big, NULL);

        /* This very process maps no libjvm.so; libc is not one. */
        FP_CHECK(find_mapping(getpid(), "libc.so", path, sizeof(path), &start, &pgoff));
        FP_CHECK_EQ_INT(fp_hotspot_open(getpid(), path, start, pgoff, &h, why, sizeof(why)),
                        -ENOENT);
        printf("# libc: %s\n", why);
        FP_CHECK(strstr(why, "exports no VMStructs") != NULL);
        FP_CHECK_EQ_INT(
            fp_hotspot_open(getpid(), "/nonexistent/libjvm.so", 0, 0, &h, why, sizeof(why)),
            -ENOENT);

        if (system("command -v java >/dev/null 2>&1") != 0) {
                printf("# java is not installed: the live JVM's part is skipped\n");
                return FP_TEST_DONE();
        }
        /* A JVM that waits: a one-file program run from its source. */
        const char *tmp = getenv("TMPDIR");
        char src[512];
        snprintf(src, sizeof(src), "%s/fp-test-hotspot-%d.java", tmp && *tmp ? tmp : "/tmp",
                 (int)getpid());
        FILE *sf = fopen(src, "we");
        FP_CHECK(sf != NULL);
        if (!sf)
                return FP_TEST_DONE();
        fputs("class Wait { public static void main(String[] a) throws Exception "
              "{ Thread.sleep(30000); } }\n",
              sf);
        fclose(sf);
        pid_t jvm = fork();
        if (jvm == 0) {
                execlp("java", "java", "-Xint", "-XX:+UseSerialGC", "-Xmx64m", src, NULL);
                _exit(127);
        }
        /* Until its libjvm.so is mapped and initialized (its VMStructs are static data). */
        bool opened = false;
        for (int i = 0; i < 400 && !opened; i++) {
                usleep(5000);
                if (find_mapping(jvm, "libjvm.so", path, sizeof(path), &start, &pgoff)) {
                        char rooted[4200];
                        snprintf(rooted, sizeof(rooted), "/proc/%d/root%s", (int)jvm, path);
                        opened =
                            fp_hotspot_open(jvm, rooted, start, pgoff, &h, why, sizeof(why)) == 0;
                }
        }
        FP_CHECK(opened);
        if (!opened) {
                printf("# the JVM's layouts were not read: %s\n", why);
        } else {
                uint64_t stack = 0;
                FP_CHECK(find_mapping(jvm, "[stack]", path, sizeof(path), &stack, &pgoff) || 1);
                const uint64_t junk[] = {0,     8,          0x1000,        start, start + 0x1234,
                                         stack, stack + 64, UINT64_MAX - 7};
                for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                        FP_CHECK(fp_hotspot_method(h, junk[i]) == NULL);
                FP_CHECK(fp_hotspot_method(h, 0x1000) == NULL); /* cached: asked once */
                size_t failed = 0;
                FP_CHECK_EQ_INT((int)fp_hotspot_n_named(h, &failed), 0);
                printf(
                    "# a live JVM's layouts read; %zu values that are no method's gave no name\n",
                    failed);
                FP_CHECK(failed >= 5);
                code_cache(h, stack);
                fp_hotspot_free(h);
        }
        kill(jvm, SIGKILL);
        waitpid(jvm, NULL, 0);
        unlink(src);
        return FP_TEST_DONE();
}
