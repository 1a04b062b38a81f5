/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of demangling (agent/stacks/demangle.c):
 *   - C++, Rust legacy and Rust v0 names as their compilers write them,
 *     clone suffixes and PLT stubs' "@plt";
 *   - every C++ name of libstdc++'s dynamic symbol table demangled as
 *     binutils' c++filt demangles it (where c++filt is installed);
 *   - names that are not mangled, or mangled wrong, stay as they are;
 *   - hostile names: longer than the bound, deeply nested, an answer past
 *     the buffer, 200,000 random ones (no crash; the ASan build checks the
 *     reads; the slowest is printed);
 *   - the cache: one answer per name, trimmed only past its bounds.
 */
#include "demangle.h"
#include "fp-test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(const char *mangled, const char *want)
{
        char buf[FP_DEMANGLE_MAX_OUT];
        int ok = fp_demangle_into(mangled, buf, sizeof(buf));
        const char *cached = fp_demangle(mangled);

        if (!want) {
                FP_CHECK_EQ_INT(ok, 0);
                FP_CHECK(cached == NULL);
                return;
        }
        FP_CHECK_EQ_INT(ok, 1);
        FP_CHECK_EQ_STR(buf, want);
        FP_CHECK(cached != NULL);
        if (cached)
                FP_CHECK_EQ_STR(cached, want);
}

static void test_known(void)
{
        check("_ZN4node5StartEiPPc", "node::Start(int, char**)");
        check("_ZNSt6vectorIiSaIiEE9push_backERKi",
              "std::vector<int, std::allocator<int> >::push_back(int const&)");
        check("_ZN2v88internal7Isolate4InitEPNS0_12SnapshotDataEb",
              "v8::internal::Isolate::Init(v8::internal::SnapshotData*, bool)");
        check("_Z4workv.cold", "work() [clone .cold]");
        check("_ZN4node5StartEiPPc@plt", "node::Start(int, char**)@plt");
        /* Rust: legacy (the hash dropped) and v0. */
        check("_ZN3std2rt10lang_start17h5a3b0c1d2e3f4a5bE", "std::rt::lang_start");
        check("_ZN4core3ptr13drop_in_place17h0123456789abcdefE", "core::ptr::drop_in_place");
        check("_RNvCs1234_7mycrate3foo", "mycrate::foo");
        check("_RNvNtCs1234_7mycrate5inner3bar", "mycrate::inner::bar");
        /* Not mangled, or not well. */
        check("main", NULL);
        check("_start", NULL);
        check("_Zfoo", NULL);
        check("_ZN3foo", NULL);
        check("_R", NULL);
        check("", NULL);
        FP_CHECK(fp_demangle(NULL) == NULL);
        /* An answer that does not fit the buffer is none. */
        char small[12], fits_name[25];
        FP_CHECK_EQ_INT(fp_demangle_into("_ZN4node5StartEiPPc", small, sizeof(small)), 0);
        /* The name fits, its suffix does not. */
        FP_CHECK_EQ_INT(fp_demangle_into("_ZN4node5StartEiPPc", fits_name, sizeof(fits_name)), 1);
        FP_CHECK_EQ_INT(fp_demangle_into("_ZN4node5StartEiPPc@plt", fits_name, sizeof(fits_name)),
                        0);
}

/*
 * c++filt spells out the standard library's abbreviations (its verbose
 * mode, on by default); without it the demangler writes them as a person
 * does: std::string, std::istream, std::ostream, std::iostream (but for a
 * constructor's or destructor's class). Both answers are compared so.
 */
static void abbreviate(char *s)
{
        static const char *const longs[][2] = {
            {"std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
             "std::string"},
            {"std::basic_istream<char, std::char_traits<char> >", "std::istream"},
            {"std::basic_ostream<char, std::char_traits<char> >", "std::ostream"},
            {"std::basic_iostream<char, std::char_traits<char> >", "std::iostream"},
            /* the space that closed the long form's template */
            {"std::string >", "std::string>"},
            {"std::istream >", "std::istream>"},
            {"std::ostream >", "std::ostream>"},
            {"std::iostream >", "std::iostream>"},
        };
        for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++) {
                size_t ll = strlen(longs[i][0]), sl = strlen(longs[i][1]);
                for (char *at; (at = strstr(s, longs[i][0]));)
                        memmove(at + sl, at + ll, strlen(at + ll) + 1), memcpy(at, longs[i][1], sl);
        }
}

/* Every _Z name of libstdc++'s .dynsym, beside c++filt's answer. */
static void test_against_cxxfilt(void)
{
        const char *lib = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
        char cmd[512], line[8192], buf[FP_DEMANGLE_MAX_OUT];
        size_t n = 0, same = 0;
        FILE *f;

        if (system("command -v c++filt >/dev/null 2>&1 && command -v nm >/dev/null 2>&1") != 0) {
                printf("SKIP: c++filt or nm not installed\n");
                return;
        }
        snprintf(cmd, sizeof(cmd),
                 "nm -D --defined-only %s | awk '$3 ~ /^_Z/ {sub(/@.*/, \"\", $3); print $3}' |"
                 " sort -u | head -3000 |"
                 " while read -r s; do printf '%%s\\t%%s\\n' \"$s\" \"$(c++filt \"$s\")\"; done",
                 lib);
        f = popen(cmd, "r");
        FP_CHECK(f != NULL);
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                char *tab = strchr(line, '\t');
                if (!tab)
                        continue;
                *tab = '\0';
                tab[1 + strcspn(tab + 1, "\n")] = '\0';
                n++;
                abbreviate(tab + 1);
                int ok = fp_demangle_into(line, buf, sizeof(buf));
                abbreviate(buf); /* a constructor's class it writes in full */
                if (ok && strcmp(buf, tab + 1) == 0)
                        same++;
                else
                        printf("differs: %s: ours '%s', c++filt '%s'\n", line, buf, tab + 1);
        }
        pclose(f);
        printf("libstdc++: %zu of %zu names as c++filt names them\n", same, n);
        FP_CHECK(n > 1000);
        FP_CHECK_EQ_INT(same, n);
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_hostile(void)
{
        static char name[FP_DEMANGLE_MAX_IN * 4], buf[FP_DEMANGLE_MAX_OUT];
        double worst = 0, t;
        size_t len;

        /* Past the input bound: not tried. */
        memset(name, 'A', sizeof(name) - 1);
        memcpy(name, "_ZN", 3);
        name[sizeof(name) - 1] = '\0';
        FP_CHECK_EQ_INT(fp_demangle_into(name, buf, sizeof(buf)), 0);
        /* Deep nesting within the bound: libiberty's recursion limit answers. */
        len = 0;
        len += (size_t)sprintf(name + len, "_Z1f");
        while (len < FP_DEMANGLE_MAX_IN - 8)
                len += (size_t)sprintf(name + len, "PFv");
        name[len] = '\0';
        t = now_s();
        (void)fp_demangle_into(name, buf, sizeof(buf));
        printf("4 KiB of nested function pointers: %.3f ms\n", (now_s() - t) * 1e3);
        /* Back-references that double the answer at each level: bounded by the buffer. */
        len = (size_t)sprintf(name, "_Z1fI1A");
        for (int i = 0; i < 40; i++)
                len += (size_t)sprintf(name + len, "IS0_S0_E");
        strcpy(name + len, "EvT_");
        t = now_s();
        int ok = fp_demangle_into(name, buf, sizeof(buf));
        printf("doubling back-references: %s in %.3f ms\n", ok ? "demangled" : "left as it is",
               (now_s() - t) * 1e3);
        /* Random names that start as mangled ones. */
        srand(42);
        const char alpha[] = "_ZNRSvEIJcilPKFT0123456789abcdefhs@.";
        for (int k = 0; k < 200000; k++) {
                size_t n = 2 + (size_t)rand() % 60;
                name[0] = '_';
                name[1] = k % 4 ? 'Z' : 'R';
                for (size_t i = 2; i < n; i++)
                        name[i] = alpha[(size_t)rand() % (sizeof(alpha) - 1)];
                name[n] = '\0';
                t = now_s();
                if (fp_demangle_into(name, buf, sizeof(buf)))
                        FP_CHECK(strlen(buf) < sizeof(buf));
                t = now_s() - t;
                if (t > worst)
                        worst = t;
        }
        printf("200000 random names: the slowest took %.3f ms\n", worst * 1e3);
}

static void test_cache(void)
{
        fp_demangle_reset();
        FP_CHECK_EQ_INT(fp_demangle_cached(), 0);
        const char *a = fp_demangle("_ZN4node5StartEiPPc");
        const char *b = fp_demangle("_ZN4node5StartEiPPc");
        FP_CHECK(a != NULL && a == b);
        FP_CHECK(fp_demangle("_Zbad") == NULL);
        FP_CHECK(fp_demangle("plain") == NULL); /* not mangled: not even cached */
        FP_CHECK_EQ_INT(fp_demangle_cached(), 2);
        /* Within its bounds a trim keeps it: a's answer stays valid. */
        FP_CHECK_EQ_INT(fp_demangle_trim(), 0);
        FP_CHECK_EQ_STR(a, "node::Start(int, char**)");
        /* Many names: the table grows and answers each. */
        char name[64];
        for (int i = 0; i < 5000; i++) {
                snprintf(name, sizeof(name), "_Z%zuf%dv",
                         strlen("f") + (size_t)snprintf(NULL, 0, "%d", i), i);
                const char *dm = fp_demangle(name);
                char want[64];
                snprintf(want, sizeof(want), "f%d()", i);
                FP_CHECK(dm != NULL);
                if (dm)
                        FP_CHECK_EQ_STR(dm, want);
        }
        FP_CHECK_EQ_INT(fp_demangle_cached(), 5002);
        fp_demangle_reset();
        FP_CHECK_EQ_INT(fp_demangle_cached(), 0);
}

int main(void)
{
        test_known();
        test_against_cxxfilt();
        test_hostile();
        test_cache();
        fp_demangle_reset();
        return FP_TEST_DONE();
}
