/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of interpreted Java methods' names (agent/stacks/hotspot.c):
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

int main(void)
{
        char why[256] = "";
        struct fp_hotspot *h = NULL;
        char path[4096];
        uint64_t start, pgoff;

        elf_version(EV_CURRENT);
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
                fp_hotspot_free(h);
        }
        kill(jvm, SIGKILL);
        waitpid(jvm, NULL, 0);
        unlink(src);
        return FP_TEST_DONE();
}
