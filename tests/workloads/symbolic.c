/* SPDX-License-Identifier: MIT */
/*
 * symbolic: a workload whose hot code sits where symbolization is hard.
 *
 * Four threads, each named for what it exercises, run for --seconds:
 *   "t-plugin"   spins in a library dlopen()ed --delay-ms after start
 *                (so a profiler attached before learns of it from an mmap
 *                record), through plugin_spin() -> plugin_hidden_work();
 *   "t-stripped" does the same in a stripped copy of that library, where
 *                the hidden function has no symbol at all;
 *   "t-vdso"     calls clock_gettime(CLOCK_MONOTONIC) in a loop: the vdso;
 *   "t-jit"      runs machine code copied into an anonymous executable
 *                mapping (x86-64 only): no file, no symbols.
 *
 * Usage: symbolic --plugin LIB --stripped LIB [--seconds S] [--delay-ms D]
 *                 [--ready FILE]
 * The PID is printed on stdout first; --ready FILE appears once the
 * threads exist (before the libraries are loaded).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double seconds = 5;
static int delay_ms = 500;
static const char *plugin_path, *stripped_path;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *plugin_thread(void *arg)
{
        const char *path = arg;
        double end = now_s() + seconds;
        usleep((useconds_t)delay_ms * 1000);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                fprintf(stderr, "symbolic: cannot load %s: %s\n", path, dlerror());
                exit(1);
        }
        uint64_t (*spin)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(h, "plugin_spin");
        if (!spin) {
                fprintf(stderr, "symbolic: %s has no plugin_spin\n", path);
                exit(1);
        }
        while (now_s() < end)
                spin(200000);
        return NULL;
}

__attribute__((noinline)) void vdso_loop(void);
__attribute__((noinline)) void vdso_loop(void)
{
        struct timespec ts;
        double end = now_s() + seconds;
        while (now_s() < end)
                for (int i = 0; i < 1000; i++)
                        clock_gettime(CLOCK_MONOTONIC, &ts);
}

static void *vdso_thread(void *arg)
{
        (void)arg;
        vdso_loop();
        return NULL;
}

static void *jit_thread(void *arg)
{
        (void)arg;
#if defined(__x86_64__)
        /* mov rcx, rdi; loop: dec rcx; jnz loop; ret */
        static const uint8_t code[] = {0x48, 0x89, 0xf9, 0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};
        void *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
                return NULL;
        memcpy(mem, code, sizeof(code));
        if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) < 0)
                return NULL;
        void (*fn)(uint64_t) = (void (*)(uint64_t))mem;
        double end = now_s() + seconds;
        while (now_s() < end)
                fn(1000000);
#endif
        return NULL;
}

int main(int argc, char **argv)
{
        const char *ready = NULL;
        for (int i = 1; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--plugin") == 0)
                        plugin_path = argv[i + 1];
                else if (strcmp(argv[i], "--stripped") == 0)
                        stripped_path = argv[i + 1];
                else if (strcmp(argv[i], "--seconds") == 0)
                        seconds = atof(argv[i + 1]);
                else if (strcmp(argv[i], "--delay-ms") == 0)
                        delay_ms = atoi(argv[i + 1]);
                else if (strcmp(argv[i], "--ready") == 0)
                        ready = argv[i + 1];
                else {
                        fprintf(stderr, "symbolic: unknown option %s\n", argv[i]);
                        return 2;
                }
        }
        if (!plugin_path || !stripped_path) {
                fprintf(stderr, "usage: symbolic --plugin LIB --stripped LIB [--seconds S] "
                                "[--delay-ms D] [--ready FILE]\n");
                return 2;
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);

        pthread_t t[4];
        pthread_create(&t[0], NULL, plugin_thread, (void *)plugin_path);
        pthread_setname_np(t[0], "t-plugin");
        pthread_create(&t[1], NULL, plugin_thread, (void *)stripped_path);
        pthread_setname_np(t[1], "t-stripped");
        pthread_create(&t[2], NULL, vdso_thread, NULL);
        pthread_setname_np(t[2], "t-vdso");
        pthread_create(&t[3], NULL, jit_thread, NULL);
        pthread_setname_np(t[3], "t-jit");
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (f)
                        fclose(f);
        }
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        return 0;
}
