/* SPDX-License-Identifier: MIT */
/*
 * A process that looks like a HotSpot JVM and lies about its code cache,
 * for test-java.sh: it loads the hostile libjvm.so at LIB
 * (tests/workloads/java/fakejvm.c), catches SIGQUIT as a JVM does (and
 * ignores it), prints its pid, and spins in the code MODE describes
 * (loops, free, endless) until it is killed.
 *
 *   hostilejvm LIB MODE
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_quit(int sig)
{
        (void)sig;
}

int main(int argc, char **argv)
{
        struct sigaction sa;
        void *lib;
        void (*run)(const char *);

        if (argc != 3) {
                fprintf(stderr, "usage: hostilejvm LIB loops|free|endless\n");
                return 2;
        }
        if (!(lib = dlopen(argv[1], RTLD_NOW))) {
                fprintf(stderr, "hostilejvm: %s\n", dlerror());
                return 1;
        }
        *(void **)&run = dlsym(lib, "fakejvm_run");
        if (!run) {
                fprintf(stderr, "hostilejvm: %s has no fakejvm_run\n", argv[1]);
                return 1;
        }
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_quit;
        sigaction(SIGQUIT, &sa, NULL);
        printf("%d\n", (int)getpid());
        fflush(stdout);
        run(argv[2]);
        return 0;
}
