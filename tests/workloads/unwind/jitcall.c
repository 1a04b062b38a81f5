// SPDX-License-Identifier: MIT
/*
 * jitcall — code generated at run time, named in a perf map.
 *
 * Copies a small function (push rbp; mov rbp, rsp; a counting loop; pop
 * rbp; ret: frame pointers, as JIT compilers that write perf maps keep
 * them) into anonymous executable memory, writes /tmp/perf-PID.map naming
 * it "jit_hot_loop", and calls it from jit_driver() until --seconds
 * passed. A profiler that reads the map shows jit_hot_loop called by
 * jit_driver; without the map the frame is anonymous memory.
 *
 * Usage: jitcall [--seconds S] [--ready FILE] [--go FILE]
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static const uint8_t code[] = {
    0x55,             /* push %rbp */
    0x48, 0x89, 0xe5, /* mov %rsp,%rbp */
    0x48, 0x89, 0xf8, /* mov %rdi,%rax */
    0x48, 0xff, 0xc8, /* 1: dec %rax */
    0x75, 0xfb,       /* jnz 1b */
    0x5d,             /* pop %rbp */
    0xc3,             /* ret */
};

typedef uint64_t (*jit_fn)(uint64_t);

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static NOINLINE void jit_driver(jit_fn f, double seconds)
{
        double end = now() + seconds;
        while (now() < end)
                f(2000000);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
                                             {"ready", required_argument, NULL, 'r'},
                                             {"go", required_argument, NULL, 'g'},
                                             {0}};
        double seconds = 4;
        const char *ready = NULL, *go = NULL;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (c == 's')
                        seconds = atof(optarg);
                else if (c == 'r')
                        ready = optarg;
                else if (c == 'g')
                        go = optarg;
                else
                        return 2;
        }
        uint8_t *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
                return 1;
        memcpy(mem + 64, code, sizeof(code));
        if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) < 0)
                return 1;
        char path[64];
        snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
        FILE *m = fopen(path, "w");
        if (!m)
                return 1;
        fprintf(m, "%lx %zx jit_hot_loop\n", (unsigned long)(uintptr_t)(mem + 64), sizeof(code));
        fclose(m);

        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (f)
                        fclose(f);
        }
        while (go && access(go, F_OK) != 0)
                usleep(1000);
        jit_driver((jit_fn)(void *)(mem + 64), seconds);
        unlink(path);
        printf("done\n");
        return 0;
}
