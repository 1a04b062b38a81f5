/* SPDX-License-Identifier: MIT */
/*
 * The CFI compiler (agent/stacks/cfi.c) against binutils: for binaries this
 * build makes (with and without frame pointers, a shared library) and for
 * Debian's libc, every row `readelf --debug-dump=frames-interp` prints is
 * looked up in the compiled table and must say the same: the CFA's
 * register and offset, where rbp was saved, an undefined return address.
 * Rows whose rules the table does not express (registers saved in other
 * registers, expressions) must come out as unsupported, never as a wrong
 * rule. Also: hostile input (truncated and garbage sections) never
 * crashes the compiler.
 */
#include "cfi.h"
#include "fp-test.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Compares one file; returns the rows checked, counts mismatches. */
static size_t compare(const char *path, size_t *ret_bad)
{
        struct fp_cfi *t = NULL;
        char cmd[512], line[4096], cols[32][16];
        size_t n_cols = 0, checked = 0, bad = 0;
        bool in_fde = false, fde_odd = false;

        *ret_bad = 0;
        if (fp_cfi_compile_file(path, &t) < 0) {
                fprintf(stderr, "cannot compile %s\n", path);
                *ret_bad = 1;
                return 0;
        }
        snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
        FILE *f = popen(cmd, "r");
        if (!f) {
                fp_cfi_free(t);
                *ret_bad = 1;
                return 0;
        }
        while (fgets(line, sizeof(line), f)) {
                if (strstr(line, " FDE cie=")) {
                        in_fde = true;
                        fde_odd = false;
                        n_cols = 0;
                        continue;
                }
                if (strstr(line, " CIE")) {
                        in_fde = false;
                        continue;
                }
                char *p = line;
                while (*p == ' ')
                        p++;
                if (in_fde && strncmp(p, "LOC", 3) == 0) {
                        n_cols = 0;
                        for (char *tok = strtok(p, " \n"); tok && n_cols < 32;
                             tok = strtok(NULL, " \n"))
                                snprintf(cols[n_cols++], sizeof(cols[0]), "%s", tok);
                        continue;
                }
                if (!in_fde || n_cols == 0 || strlen(line) < 17 || line[16] != ' ')
                        continue;
                char *end;
                unsigned long long loc = strtoull(line, &end, 16);
                if (end != line + 16)
                        continue;
                const char *cfa = "", *rbp = "u", *ra = "u";
                bool other = false;
                size_t i = 1;
                for (char *tok = strtok(end, " \n"); tok && i < n_cols;
                     tok = strtok(NULL, " \n"), i++) {
                        if (strcmp(cols[i], "CFA") == 0)
                                cfa = tok;
                        else if (strcmp(cols[i], "rbp") == 0)
                                rbp = tok;
                        else if (strcmp(cols[i], "ra") == 0)
                                ra = tok;
                        else if (strcmp(cols[i], "rsp") == 0 && strcmp(tok, "u") != 0)
                                other = true;
                        if ((tok[0] == 'r' && tok[1] >= '0' && tok[1] <= '9') || tok[0] == '(')
                                other = true;
                }
                /*
                 * Registers kept in other registers or by expression (glibc's
                 * clone): the table need not express them, and readelf's
                 * rendering of such functions is not to be trusted either.
                 */
                if (other)
                        fde_odd = true;
                if (fde_odd || strcmp(rbp, "exp") == 0)
                        continue;
                const struct fp_cfi_row *row = fp_cfi_find(t, loc);
                bool ok;
                if (!row) {
                        ok = false;
                } else if (strcmp(ra, "u") == 0) {
                        ok = (row->flags & FP_CFI_RA_UNDEFINED) || row->cfa == FP_CFI_UNSUPPORTED;
                } else if (strcmp(cfa, "exp") == 0) {
                        /* A PLT row's threshold is no flag: 11 once read as "RA undefined". */
                        ok = (row->cfa == FP_CFI_CFA_PLT && row->flags == 0 && row->rbp_off > 0 &&
                              row->rbp_off < 16) ||
                             row->cfa == FP_CFI_UNSUPPORTED;
                } else if (strcmp(ra, "c-8") != 0) {
                        ok = row->cfa == FP_CFI_UNSUPPORTED;
                } else if (strncmp(cfa, "rsp+", 4) == 0 || strncmp(cfa, "rbp+", 4) == 0) {
                        int want = cfa[1] == 's' ? FP_CFI_CFA_SP : FP_CFI_CFA_BP;
                        ok = row->cfa == want && row->cfa_off == atoi(cfa + 4);
                        if (rbp[0] == 'c')
                                ok = ok && (row->flags & FP_CFI_RBP_SAVED) &&
                                     row->rbp_off == atoi(rbp + 1);
                        else
                                ok = ok && !(row->flags & FP_CFI_RBP_SAVED);
                } else {
                        ok = row->cfa == FP_CFI_UNSUPPORTED;
                }
                checked++;
                if (!ok) {
                        if (bad < 5)
                                fprintf(stderr,
                                        "%s: 0x%llx: readelf says CFA %s rbp %s ra %s; table "
                                        "row 0x%llx kind %d off %d rbp %d flags %x\n",
                                        path, loc, cfa, rbp, ra,
                                        row ? (unsigned long long)row->pc : 0ULL,
                                        row ? row->cfa : -1, row ? row->cfa_off : 0,
                                        row ? row->rbp_off : 0, row ? row->flags : 0);
                        bad++;
                }
        }
        pclose(f);
        fp_cfi_free(t);
        *ret_bad = bad;
        return checked;
}

static void test_against_readelf(void)
{
        static const char *const built[] = {"./leafcall-nofp", "./leafcall-fp",
                                            "./libleafcall-nofp-lib.so", "./test-cfi"};
        size_t bad, n;

        for (size_t i = 0; i < sizeof(built) / sizeof(built[0]); i++) {
                n = compare(built[i], &bad);
                printf("%s: %zu rows checked, %zu differ\n", built[i], n, bad);
                FP_CHECK(n > 10);
                FP_CHECK_EQ_INT(bad, 0);
        }
        const char *libc = "/lib/x86_64-linux-gnu/libc.so.6";
        if (access(libc, R_OK) == 0) {
                n = compare(libc, &bad);
                printf("%s: %zu rows checked, %zu differ\n", libc, n, bad);
                FP_CHECK(n > 10000);
                FP_CHECK_EQ_INT(bad, 0);
        }
}

/* Damaged copies of a real binary: truncated and scribbled over. */
static void test_hostile(void)
{
        char path[] = "/tmp/fp-test-cfi.XXXXXX";
        FILE *src = fopen("./leafcall-nofp", "rb");
        FP_CHECK(src != NULL);
        if (!src)
                return;
        static unsigned char buf[1 << 22];
        size_t n = fread(buf, 1, sizeof(buf), src);
        fclose(src);
        int fd = mkstemp(path);
        FP_CHECK(fd >= 0);
        close(fd);
        unsigned seed = 1;
        for (int round = 0; round < 40; round++) {
                size_t len = round < 20 ? n * (size_t)(round + 1) / 21 : n;
                if (round >= 20) /* scribble over random bytes of the whole file */
                        for (int k = 0; k < 200; k++) {
                                seed = seed * 1103515245 + 12345;
                                buf[(seed >> 8) % n] ^= (unsigned char)(seed >> 24);
                        }
                FILE *o = fopen(path, "wb");
                fwrite(buf, 1, len, o);
                fclose(o);
                struct fp_cfi *t = NULL;
                int r = fp_cfi_compile_file(path, &t);
                FP_CHECK(r == 0 || r == -ENODATA || r == -EBADMSG || r == -ENOEXEC);
                /* Whatever came out is sorted and looks up without trouble. */
                for (size_t i = 1; t && i < fp_cfi_n_rows(t); i++)
                        if (fp_cfi_row(t, i - 1)->pc >= fp_cfi_row(t, i)->pc) {
                                FP_CHECK(!"rows out of order");
                                break;
                        }
                if (t)
                        (void)fp_cfi_find(t, 0x1234);
                fp_cfi_free(t);
        }
        unlink(path);
        /* Not a file one should block on or read: refused at once. */
        FP_CHECK_EQ_INT(fp_cfi_compile_file("/tmp", NULL), -EINVAL);
}

/* The file offset and size of section name in path (readelf -S), or 0. */
static size_t section_range(const char *path, const char *name, size_t *ret_size)
{
        char cmd[512], line[512];
        size_t off = 0;
        snprintf(cmd, sizeof(cmd), "readelf -SW '%s'", path);
        FILE *f = popen(cmd, "r");
        while (f && fgets(line, sizeof(line), f)) {
                char *p = strstr(line, name);
                unsigned long long addr, o, sz;
                if (!p || p[strlen(name)] != ' ')
                        continue;
                if (sscanf(p + strlen(name), " %*s %llx %llx %llx", &addr, &o, &sz) == 3) {
                        off = (size_t)o;
                        *ret_size = (size_t)sz;
                }
        }
        if (f)
                pclose(f);
        return off;
}

/*
 * Scribbles inside .eh_frame itself (lengths, CIE pointers, encodings,
 * instructions): thousands of variations must each compile or be refused
 * without reading outside the section (the ASan build checks that).
 */
static void test_hostile_eh_frame(void)
{
        static unsigned char orig[1 << 22], buf[1 << 22];
        char path[] = "/tmp/fp-test-cfi-eh.XXXXXX";
        size_t size = 0, off = section_range("./leafcall-nofp", ".eh_frame", &size);
        FILE *src = fopen("./leafcall-nofp", "rb");
        FP_CHECK(src && off && size);
        if (!src || !off || !size)
                return;
        size_t n = fread(orig, 1, sizeof(orig), src);
        fclose(src);
        int fd = mkstemp(path);
        close(fd);
        unsigned seed = 7, compiled = 0;
        for (int round = 0; round < 300; round++) {
                memcpy(buf, orig, n);
                for (int k = 0; k < 1 + round % 8; k++) {
                        seed = seed * 1103515245 + 12345;
                        size_t at = off + (seed >> 4) % size;
                        seed = seed * 1103515245 + 12345;
                        buf[at] = round % 3 == 0 ? 0xff : (unsigned char)(seed >> 16);
                }
                FILE *o = fopen(path, "wb");
                fwrite(buf, 1, n, o);
                fclose(o);
                struct fp_cfi *t = NULL;
                int r = fp_cfi_compile_file(path, &t);
                FP_CHECK(r == 0 || r == -ENODATA || r == -EBADMSG);
                compiled += r == 0;
                if (t)
                        (void)fp_cfi_find(t, 0x1100);
                fp_cfi_free(t);
        }
        printf("300 scribbled .eh_frame sections: %u compiled (keeping what was good), the rest "
               "refused\n",
               compiled);
        unlink(path);
}

int main(void)
{
        test_against_readelf();
        test_hostile();
        test_hostile_eh_frame();
        return FP_TEST_DONE();
}
