/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of Python stacks read at sample time (agent/sampling/
 * pystack.bpf.c, pystack.c): each CPython present (Debian's python3.11,
 * pyenv's 3.8 to 3.13) runs tests/workloads/python/pystack.py, whose main
 * thread spins in c() <- b() <- a() <- the module and whose second thread
 * spins in e() <- d(); a cpu-clock event on each of its threads at 1 kHz
 * runs the program for 0.6 s. The records of each thread must hold its
 * stack, innermost first, as the code objects' addresses the program wrote
 * itself (in 95% of them at least: a sample may land between frames), each
 * evaluation's outermost frame marked (every frame before 3.11, which
 * evaluates each call in C; the module's from 3.11, which does not).
 * Skipped where BPF programs cannot be loaded.
 */
#include "elfread.h"
#include "pystack.h"
#include "python.h"
#include "fp-test.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct want {
        uint64_t a, b, c, d, e, module;
        pid_t pid;
        int minor;
        size_t main_n, main_ok, second_n, second_ok, other;
};

static bool main_stack(const struct want *w, const struct fp_pystack_record *r)
{
        const struct fp_pystack_frame *f = r->frames;
        if (r->status != FP_PYSTACK_OK || r->n_frames != 4 || f[0].code != w->c ||
            f[1].code != w->b || f[2].code != w->a || f[3].code != w->module)
                return false;
        for (int i = 0; i < 4; i++)
                if (!!(f[i].flags & FP_PYSTACK_ENTRY) != (w->minor <= 10 || i == 3))
                        return false;
        return true;
}

static void on_record(void *ud, const struct fp_pystack_record *r)
{
        struct want *w = ud;

        if ((pid_t)r->tgid != w->pid) {
                w->other++;
                return;
        }
        if ((pid_t)r->tid == w->pid) {
                w->main_n++;
                w->main_ok += main_stack(w, r);
        } else {
                w->second_n++;
                w->second_ok += r->status == FP_PYSTACK_OK && r->n_frames >= 3 &&
                                r->frames[0].code == w->e && r->frames[1].code == w->d &&
                                (r->frames[r->n_frames - 1].flags & FP_PYSTACK_ENTRY);
        }
}

/* Runs pystack.py under python (its interpreter in interp, PIE or not); checks its records. */
static void check(const char *python, const char *interp, bool pie)
{
        char out[64], ready[64], why[256], err[256], line[256];
        struct want w = {0};
        struct fp_py_binary b;
        struct fp_pystack *s = NULL;
        int fd, fds[16], n_fds = 0, r;
        Elf *elf;

        FP_CHECK_EQ_INT(fp_elf_open(interp, &fd, &elf, NULL), 0);
        r = fp_py_detect(interp, elf, &b, why, sizeof(why));
        elf_end(elf);
        close(fd);
        FP_CHECK_EQ_INT(r, 1);
        if (r != 1)
                return;
        w.minor = b.minor;
        snprintf(out, sizeof(out), "/tmp/fp-test-pystack-%d.out", getpid());
        snprintf(ready, sizeof(ready), "/tmp/fp-test-pystack-%d.ready", getpid());
        unlink(ready);
        w.pid = fork();
        if (w.pid == 0) {
                execl(python, python, FP_TEST_DATA "/../workloads/python/pystack.py", out, ready,
                      "20", (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 400 && access(ready, F_OK) < 0; i++)
                usleep(25000);
        FILE *f = fopen(out, "r");
        while (f && fgets(line, sizeof(line), f)) {
                char name[32];
                unsigned long long id;
                if (sscanf(line, "%31s %llu", name, &id) != 2)
                        continue;
                uint64_t *slot = !strcmp(name, "a")        ? &w.a
                                 : !strcmp(name, "b")      ? &w.b
                                 : !strcmp(name, "c")      ? &w.c
                                 : !strcmp(name, "d")      ? &w.d
                                 : !strcmp(name, "e")      ? &w.e
                                 : !strcmp(name, "module") ? &w.module
                                                           : NULL;
                if (slot)
                        *slot = id;
        }
        if (f)
                fclose(f);
        FP_CHECK(w.a && w.b && w.c && w.d && w.e && w.module);
        r = fp_pystack_new(on_record, &w, &s, err, sizeof(err));
        if (r == -EPERM || r == -EOPNOTSUPP) {
                printf("SKIP: %s\n", err);
                goto done;
        }
        FP_CHECK_EQ_INT(r, 0); /* any other refusal is the program's fault */
        if (r < 0) {
                printf("%s\n", err);
                goto done;
        }
        FP_CHECK_EQ_INT(fp_pystack_add(s, w.pid, &b, pie ? fp_test_map_start(w.pid, interp) : 0),
                        0);
        /* A cpu-clock event at 1 kHz on each of its threads. */
        char task[64];
        snprintf(task, sizeof(task), "/proc/%d/task", w.pid);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "ls %s", task);
        FILE *ls = popen(cmd, "r");
        while (ls && n_fds < 16 && fgets(line, sizeof(line), ls)) {
                struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE,
                                            .size = sizeof(a),
                                            .config = PERF_COUNT_SW_CPU_CLOCK,
                                            .sample_period = 1000000,
                                            .exclude_kernel = 1};
                int e = (int)syscall(SYS_perf_event_open, &a, atoi(line), -1, -1, 0);
                FP_CHECK(e >= 0);
                if (e < 0)
                        continue;
                FP_CHECK_EQ_INT(fp_pystack_attach(s, e), 0);
                fds[n_fds++] = e;
        }
        if (ls)
                pclose(ls);
        usleep(600000);
        for (int i = 0; i < n_fds; i++)
                close(fds[i]);
        FP_CHECK(fp_pystack_poll(s) > 0);
        printf("%s (3.%d): main thread %zu of %zu records c<-b<-a<-module, second thread %zu of "
               "%zu e<-d, %zu of other processes\n",
               python, w.minor, w.main_ok, w.main_n, w.second_ok, w.second_n, w.other);
        FP_CHECK(w.main_n > 50 && w.second_n > 50); /* 0.6 s at 1 kHz, the GIL shared: ~300 each */
        FP_CHECK(w.main_ok >= w.main_n * 95 / 100);
        FP_CHECK(w.second_ok >= w.second_n * 95 / 100);
        FP_CHECK_EQ_INT(w.other, 0);
        fp_pystack_free(s);
done:
        kill(w.pid, SIGKILL);
        waitpid(w.pid, NULL, 0);
        unlink(out);
        unlink(ready);
}

int main(void)
{
        char root[512] = "", lib[1024], python[1024];
        FILE *p = popen("pyenv root 2>/dev/null", "r");

        elf_version(EV_CURRENT);
        if (p && fgets(root, sizeof(root), p))
                root[strcspn(root, "\n")] = '\0';
        if (p)
                pclose(p);
        if (access("/usr/bin/python3.11", X_OK) == 0)
                check("/usr/bin/python3.11", "/usr/bin/python3.11", false);
        for (int minor = FP_PY_MINOR_MIN; *root && minor <= FP_PY_MINOR_MAX; minor++) {
                char find[1024];
                snprintf(find, sizeof(find),
                         "ls -d %s/versions/3.%d.*/lib/libpython3.%d.so.1.0 2>/dev/null | head -1",
                         root, minor, minor);
                p = popen(find, "r");
                if (!p || !fgets(lib, sizeof(lib), p)) {
                        if (p)
                                pclose(p);
                        printf("SKIP: no pyenv Python 3.%d\n", minor);
                        continue;
                }
                pclose(p);
                lib[strcspn(lib, "\n")] = '\0';
                snprintf(python, sizeof(python), "%.*s/bin/python3.%d",
                         (int)(strstr(lib, "/lib/libpython") - lib), lib, minor);
                check(python, lib, true);
        }
        return FP_TEST_DONE();
}
