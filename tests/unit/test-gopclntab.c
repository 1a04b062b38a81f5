/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of Go function names from .gopclntab (agent/stacks/gopclntab.c):
 * a Go program built here with `-ldflags='-s -w'` is named as Go's own
 * reader, debug/gosym (tests/workloads/unwind/go/gosymdump.go), reads the
 * same table: every function at the same entry, at least 1,000 of them; and through the symbol
 * tables (symbols.c) a lookup inside main.leaf gives main.leaf. Then the section is scribbled over
 * 100 times (random bytes at random offsets, the header's fields among them): every run ends,
 * without a read outside the section (which the ASan build would catch). Skipped without go.
 */
#include "gopclntab.h"
#include "symbols.h"
#include "fp-test.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

struct want {
        uint64_t addr;
        char name[256];
};
static struct want *wants;
static size_t n_wants, n_found, n_wrong;

/* Each function named: matched against debug/gosym's entry of that name. */
static int check_fn(void *userdata, uint64_t start, uint64_t size, const char *name, size_t len)
{
        (void)userdata;
        (void)size;
        /* A name may stand at two addresses (Go's ABI wrappers): any of them is right. */
        bool named = false, right = false;
        uint64_t other = 0;
        for (size_t i = 0; i < n_wants && !right; i++)
                if (strlen(wants[i].name) == len && memcmp(wants[i].name, name, len) == 0) {
                        named = true;
                        right = wants[i].addr == start;
                        other = wants[i].addr;
                }
        if (right)
                n_found++;
        else if (named && n_wrong++ < 5)
                fprintf(stderr, "%.*s at 0x%" PRIx64 ", debug/gosym: 0x%" PRIx64 "\n", (int)len,
                        name, start, other);
        return 0;
}

static size_t n_named;
static int count_fn(void *userdata, uint64_t start, uint64_t size, const char *name, size_t len)
{
        (void)userdata;
        (void)start;
        (void)size;
        (void)name;
        (void)len;
        n_named++;
        return 0;
}

static size_t n_inl_read;
static int count_inl(void *userdata, uint64_t start, uint64_t size, const char *const *names,
                     const size_t *lens, unsigned n)
{
        (void)userdata;
        (void)start;
        (void)size;
        (void)names;
        (void)lens;
        FP_CHECK(n >= 1 && n <= FP_GOPCLN_MAX_INLINE);
        n_inl_read++;
        return 0;
}

/* Names a file's functions with fn and reads its inline trees (counted). */
static int collect_file(const char *path, fp_gopcln_fn fn)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
        int r = elf ? fp_gopclntab_collect(elf, fn, NULL) : -EINVAL;
        if (r >= 0 && fp_gopclntab_inlined(elf, count_inl, NULL) < 0)
                r = -EIO;
        if (elf)
                elf_end(elf);
        close(fd);
        return r;
}

static void load_wants(const char *nm_out)
{
        FILE *f = fopen(nm_out, "re");
        char line[512];

        while (f && fgets(line, sizeof(line), f)) {
                unsigned long long a;
                int at = 0;
                if (sscanf(line, "%llx %n", &a, &at) != 1 || !at)
                        continue;
                char *name = line + at; /* to the line's end: a Go name may hold a space */
                name[strcspn(name, "\n")] = 0;
                wants = realloc(wants, (n_wants + 1) * sizeof(*wants));
                if (!wants)
                        abort();
                wants[n_wants].addr = a;
                snprintf(wants[n_wants].name, sizeof(wants[n_wants].name), "%s", name);
                n_wants++;
        }
        if (f)
                fclose(f);
}

/*
 * The inlined calls of path (a stripped build) against DWARF's of the same
 * program (goinldump.go's lines in dwarf): each of DWARF's ranges has the
 * same chain at its first and last byte. Returns the ranges compared.
 */
static size_t check_inlined(const char *path, const char *dwarf)
{
        struct fp_symcache *c = fp_symcache_new();
        struct fp_symtab *t = NULL;
        FILE *f = fopen(dwarf, "re");
        char line[2048], got[2048];
        size_t n = 0, same = 0, main_seen = 0, gaps = 0, gaps_empty = 0;
        unsigned long long prev_hi = 0;

        FP_CHECK(f != NULL);
        FP_CHECK_EQ_INT(fp_symcache_get(c, path, NULL, &t), 0);
        while (t && f && fgets(line, sizeof(line), f)) {
                unsigned long long lo, hi;
                int at = 0;
                if (sscanf(line, "%llx %llx %n", &lo, &hi, &at) != 2 || !at || hi <= lo)
                        continue;
                char *want = line + at;
                want[strcspn(want, "\n")] = 0;
                /* Between two of DWARF's ranges nothing was inlined. */
                if (prev_hi && lo > prev_hi) {
                        const char *names[1];
                        gaps++;
                        gaps_empty += fp_symtab_inlined(t, prev_hi, names, 1) == 0;
                }
                prev_hi = hi;
                bool ok = true;
                for (int k = 0; k < 2; k++) {
                        const char *names[FP_GOPCLN_MAX_INLINE];
                        size_t m =
                            fp_symtab_inlined(t, k ? hi - 1 : lo, names, FP_GOPCLN_MAX_INLINE);
                        got[0] = 0;
                        for (size_t i = 0; i < m; i++)
                                snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s",
                                         i ? ";" : "", names[i]);
                        if (strcmp(got, want) != 0) {
                                if (n - same < 5)
                                        fprintf(stderr, "%s at 0x%llx: DWARF %s, .gopclntab %s\n",
                                                path, k ? hi - 1 : lo, want, got);
                                ok = false;
                        }
                }
                main_seen += ok && strcmp(want, "main.inner;main.outer") == 0;
                same += ok;
                n++;
        }
        printf("# %s: %zu of DWARF's %zu inlined ranges alike (%zu ranges read), "
               "main.inner;main.outer among them %zu times; none inlined in %zu of %zu gaps\n",
               path, same, n, fp_symtab_n_inlined(t), main_seen, gaps_empty, gaps);
        FP_CHECK(n >= 1000);
        FP_CHECK_EQ_INT((int)same, (int)n);
        FP_CHECK(main_seen >= 1);
        FP_CHECK(gaps >= 100);
        FP_CHECK_EQ_INT((int)gaps_empty, (int)gaps);
        fp_symtab_unref(t);
        fp_symcache_free(c);
        if (f)
                fclose(f);
        return n;
}

int main(void)
{
        const char *tmp = getenv("TMPDIR");
        const char *src = FP_TEST_DATA "/../workloads/unwind/go/leafcall.go";
        const char *dump = FP_TEST_DATA "/../workloads/unwind/go/gosymdump.go";
        const char *inl = FP_TEST_DATA "/../workloads/unwind/go/inlined.go";
        const char *inldump = FP_TEST_DATA "/../workloads/unwind/go/goinldump.go";
        char path[512];

        elf_version(EV_CURRENT);
        if (system("command -v go >/dev/null 2>&1") != 0) {
                printf("# go is not installed: skipped\n");
                return FP_TEST_DONE();
        }
        snprintf(dir, sizeof(dir), "%s/fp-test-gopclntab-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
                fprintf(stderr, "Failed to create '%s': %s\n", dir, strerror(errno));
                return 1;
        }
        int built =
            fp_test_run("cd '%s' && export HOME='%s' GOCACHE='%s/cache' GOPATH='%s/gopath' "
                        "GO111MODULE=off GOFLAGS= GOTOOLCHAIN=local && "
                        "go build -ldflags='-s -w' -o stripped '%s' && "
                        "go run '%s' stripped > nm.txt && "
                        "go build -o inl-full '%s' && "
                        "go build -ldflags='-s -w' -o inl-stripped '%s' && "
                        "go build -buildmode=pie -o inl-pie-full '%s' && "
                        "go build -buildmode=pie -ldflags='-s -w' -o inl-pie '%s' && "
                        "go run '%s' inl-full > inl.txt && "
                        "go run '%s' inl-pie-full > inl-pie.txt",
                        dir, dir, dir, dir, src, dump, inl, inl, inl, inl, inldump, inldump);
        FP_CHECK_EQ_INT(built, 0);
        if (built == 0) {
                snprintf(path, sizeof(path), "%s/nm.txt", dir);
                load_wants(path);
                snprintf(path, sizeof(path), "%s/stripped", dir);
                int n = collect_file(path, check_fn);
                printf("# %d functions in .gopclntab; of debug/gosym's %zu, %zu at the same entry, "
                       "%zu elsewhere\n",
                       n, n_wants, n_found, n_wrong);
                FP_CHECK(n >= 1000);
                FP_CHECK(n_found >= 1000 && n_found == n_wants && (size_t)n == n_wants);
                FP_CHECK_EQ_INT((int)n_wrong, 0);

                /* Through the symbol tables, as the agent names a frame. */
                struct fp_symcache *c = fp_symcache_new();
                struct fp_symtab *t = NULL;
                FP_CHECK_EQ_INT(fp_symcache_get(c, path, NULL, &t), 0);
                for (size_t i = 0; t && i < n_wants; i++)
                        if (strcmp(wants[i].name, "main.leaf") == 0) {
                                const char *got = fp_symtab_lookup(t, wants[i].addr + 1, NULL);
                                FP_CHECK(got && strcmp(got, "main.leaf") == 0);
                                FP_CHECK_EQ_INT((int)fp_symtab_source(t), FP_SYM_SOURCE_PCLNTAB);
                        }
                fp_symtab_unref(t);
                fp_symcache_free(c);

                /*
                 * Inlined calls, Go 1.18 on: the stripped build and the stripped PIE
                 * (its table in .data.rel.ro.gopclntab) against their full builds' DWARF.
                 */
                char want[512];
                snprintf(want, sizeof(want), "%s/inl.txt", dir);
                snprintf(path, sizeof(path), "%s/inl-stripped", dir);
                check_inlined(path, want);
                snprintf(want, sizeof(want), "%s/inl-pie.txt", dir);
                snprintf(path, sizeof(path), "%s/inl-pie", dir);
                check_inlined(path, want);

                /* Scribbled over: every run ends, reading nothing outside the section. */
                int crashed = 0;
                /* 100 copies, each with 1 to 64 random bytes, half of them in the header. */
                if (fp_test_run(
                        "cd '%s' && off_size=$(readelf -SW stripped | "
                        "sed 's/^.*\\] //' | awk '$1 == \".gopclntab\" {print $4, $5}') && python3 "
                        "-c 'import random, sys\n"
                        "off, size = int(sys.argv[1], 16), int(sys.argv[2], 16)\n"
                        "base = open(\"stripped\", \"rb\").read()\n"
                        "for i in range(100):\n"
                        "    random.seed(i); d = bytearray(base)\n"
                        "    for k in range(random.choice([1, 4, 16, 64])):\n"
                        "        p = off + (random.randrange(64) if random.random() < 0.5 else "
                        "random.randrange(size))\n"
                        "        d[p] = random.randrange(256)\n"
                        "    open(\"s%%d\" %% i, \"wb\").write(d)' $off_size",
                        dir) != 0)
                        crashed++;
                for (int i = 0; !crashed && i < 100; i++) {
                        snprintf(path, sizeof(path), "%s/s%d", dir, i);
                        FP_CHECK(collect_file(path, count_fn) >= 0);
                }
                FP_CHECK_EQ_INT(crashed, 0);
                printf(
                    "# 100 scribbled tables read: %zu functions named, %zu inlined ranges in all\n",
                    n_named, n_inl_read);
        }
        fp_test_run("rm -rf '%s'", dir);
        free(wants);
        return FP_TEST_DONE();
}
