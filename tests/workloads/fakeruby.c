// SPDX-License-Identifier: MIT
/*
 * fakeruby — a process whose "libruby" lies (libfakeruby.so,
 * tests/workloads/ruby/fakeruby.c; tests/integration/test-ruby.sh).
 *
 * It prints its PID, writes --ready FILE and runs rb_vm_exec(MODE) of the
 * library for --seconds S of CPU time (told, junk, deep or loop: what its
 * control frames say, see the library).
 *
 * Usage: fakeruby MODE [--seconds S] [--ready FILE]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void rb_vm_exec(const char *mode, double seconds);

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
                                             {"ready", required_argument, NULL, 'r'},
                                             {NULL, 0, NULL, 0}};
        const char *ready = NULL;
        double seconds = 2;
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (c == 's')
                        seconds = atof(optarg);
                else if (c == 'r')
                        ready = optarg;
                else
                        return 2;
        }
        if (optind >= argc) {
                fprintf(stderr,
                        "usage: fakeruby told|junk|deep|loop [--seconds S] [--ready FILE]\n");
                return 2;
        }
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (ready) {
                FILE *f = fopen(ready, "w");
                if (f)
                        fclose(f);
        }
        usleep(300000); /* the agent attaches */
        rb_vm_exec(argv[optind], seconds);
        return 0;
}
