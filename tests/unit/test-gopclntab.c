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

static int collect_file(const char *path, fp_gopcln_fn fn)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
        int r = elf ? fp_gopclntab_collect(elf, fn, NULL) : -EINVAL;
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

int main(void)
{
        const char *tmp = getenv("TMPDIR");
        const char *src = FP_TEST_DATA "/../workloads/unwind/go/leafcall.go";
        const char *dump = FP_TEST_DATA "/../workloads/unwind/go/gosymdump.go";
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
        int built = fp_test_run("cd '%s' && export HOME='%s' GOCACHE='%s/cache' GOPATH='%s/gopath' "
                                "GO111MODULE=off GOFLAGS= GOTOOLCHAIN=local && "
                                "go build -ldflags='-s -w' -o stripped '%s' && "
                                "go run '%s' stripped > nm.txt",
                                dir, dir, dir, dir, src, dump);
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
                printf("# 100 scribbled tables read: %zu functions named in all\n", n_named);
        }
        fp_test_run("rm -rf '%s'", dir);
        free(wants);
        return FP_TEST_DONE();
}
