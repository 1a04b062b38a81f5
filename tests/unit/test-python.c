/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of CPython recognition (agent/runtimes/python/python.c):
 *   - every layout field against the DWARF of each pyenv build of 3.8 to
 *     3.13 present (gdb's offsetof), where pyenv and gdb are installed;
 *   - Debian's /usr/bin/python3.11 (non-PIE, stripped, Py_Version in
 *     .dynsym) and each pyenv libpython3.X.so recognised at their version,
 *     with _PyRuntime and _PyEval_EvalFrameDefault found;
 *   - pyenv's 3.6 and 3.7 refused in one line, as are a file named
 *     python3.11 that is not Python, and a program that is no Python;
 *   - the thread list of each live interpreter read through its memory:
 *     3 threads, the kernel's tids where the version keeps them;
 *   - the code objects of a module (tests/workloads/python/codeinfo.py)
 *     read through its memory: each one's name (qualified from 3.11), file
 *     (outside the BMP), first line, and the line of every instruction
 *     offset as Python itself gives it, across gaps of hundreds of lines,
 *     loops, names in Latin-1 and other scripts; a wrong address fails.
 */
#include "elfread.h"
#include "python.h"
#include "fp-test.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char pyenv[512];

static int detect(const char *path, struct fp_py_binary *b, char *why, size_t why_len)
{
        int fd, r;
        Elf *elf;

        if ((r = fp_elf_open(path, &fd, &elf, NULL)) < 0)
                return r;
        r = fp_py_detect(path, elf, b, why, why_len);
        elf_end(elf);
        close(fd);
        return r;
}

/* The gdb expressions of each field, as CPython 3.minor names it. */
static void check_dwarf(int minor, const char *lib)
{
        const struct fp_py_layout *l = fp_py_layout_of(minor);
        const char *fr = minor <= 10 ? "PyFrameObject" : "struct _PyInterpreterFrame";
        struct {
                const char *expr;
                int got;
        } f[32];
        char e[32][160], cmd[8192];
        size_t n = 0, len;

#define FIELD(value, ...)                                                                          \
        do {                                                                                       \
                snprintf(e[n], sizeof(e[n]), __VA_ARGS__);                                         \
                f[n].expr = e[n];                                                                  \
                f[n].got = (value);                                                                \
                n++;                                                                               \
        } while (0)
        FIELD(l->runtime_interp_head, "&((_PyRuntimeState*)0)->interpreters.head");
        FIELD(l->interp_tstate_head, "&((PyInterpreterState*)0)->%s",
              minor >= 11 ? "threads.head" : "tstate_head");
        FIELD(l->tstate_next, "&((PyThreadState*)0)->next");
        FIELD(l->tstate_thread_id, "&((PyThreadState*)0)->thread_id");
        if (minor >= 11)
                FIELD(l->tstate_native_thread_id, "&((PyThreadState*)0)->native_thread_id");
        FIELD(l->tstate_frame, "&((PyThreadState*)0)->%s",
              minor <= 10   ? "frame"
              : minor <= 12 ? "cframe"
                            : "current_frame");
        if (minor == 11 || minor == 12)
                FIELD(l->cframe_current_frame, "&((_PyCFrame*)0)->current_frame");
        FIELD(l->frame_previous, "&((%s*)0)->%s", fr, minor <= 10 ? "f_back" : "previous");
        FIELD(l->frame_code, "&((%s*)0)->%s", fr, minor >= 13 ? "f_executable" : "f_code");
        FIELD(l->frame_instr, "&((%s*)0)->%s", fr,
              minor <= 10   ? "f_lasti"
              : minor <= 12 ? "prev_instr"
                            : "instr_ptr");
        if (minor >= 11)
                FIELD(l->frame_owner, "&((%s*)0)->owner", fr);
        if (minor == 11)
                FIELD(l->frame_is_entry, "&((%s*)0)->is_entry", fr);
        FIELD(l->code_filename, "&((PyCodeObject*)0)->co_filename");
        FIELD(l->code_name, "&((PyCodeObject*)0)->co_name");
        if (minor >= 11)
                FIELD(l->code_qualname, "&((PyCodeObject*)0)->co_qualname");
        FIELD(l->code_firstlineno, "&((PyCodeObject*)0)->co_firstlineno");
        FIELD(l->code_linetable, "&((PyCodeObject*)0)->%s",
              minor >= 10 ? "co_linetable" : "co_lnotab");
        if (minor >= 11)
                FIELD(l->code_adaptive, "&((PyCodeObject*)0)->co_code_adaptive");
        FIELD(l->unicode_length, "&((PyASCIIObject*)0)->length");
        FIELD(l->unicode_state, "&((PyASCIIObject*)0)->state");
        FIELD(l->unicode_ascii_data, "sizeof(PyASCIIObject)");
        FIELD(l->unicode_compact_data, "sizeof(PyCompactUnicodeObject)");
        FIELD(l->bytes_size, "&((PyVarObject*)0)->ob_size");
        FIELD(l->bytes_data, "&((PyBytesObject*)0)->ob_sval");
        FIELD(l->object_type, "&((PyObject*)0)->ob_type");
#undef FIELD
        len = (size_t)snprintf(cmd, sizeof(cmd), "gdb -batch -nx");
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, " -ex 'print/d (long)(%s)'",
                                        f[i].expr);
        snprintf(cmd + len, sizeof(cmd) - len, " '%s' 2>&1", lib);
        FILE *p = popen(cmd, "r");
        char line[512];
        size_t k = 0, same = 0;
        FP_CHECK(p != NULL);
        while (p && fgets(line, sizeof(line), p)) {
                if (line[0] != '$')
                        continue; /* gdb's answers are "$N = value"; an error breaks the count */
                int v = atoi(strchr(line, '=') + 1);
                if (k < n && v == f[k].got)
                        same++;
                else if (k < n)
                        printf("3.%d: %s is %d in the DWARF, %d in the table\n", minor, f[k].expr,
                               v, f[k].got);
                k++;
        }
        if (p)
                pclose(p);
        printf("3.%d: %zu of %zu layout fields as the DWARF of %s has them\n", minor, same, n, lib);
        FP_CHECK_EQ_INT(k, n);
        FP_CHECK_EQ_INT(same, n);
}

/* ---- a live interpreter's threads ---- */

struct seen {
        pid_t tids[16];
        int n, with_native;
};

static int on_thread(void *ud, uint64_t tstate, uint64_t pthread_id, pid_t native)
{
        struct seen *s = ud;
        FP_CHECK(tstate != 0 && pthread_id != 0);
        if (s->n < 16)
                s->tids[s->n] = native;
        s->n++;
        s->with_native += native != 0;
        return 0;
}

static void check_live(const char *python, const char *interp_file, const struct fp_py_binary *b,
                       bool pie)
{
        char ready[64], cmd[1024];
        snprintf(ready, sizeof(ready), "/tmp/fp-test-python-%d", getpid());
        unlink(ready);
        pid_t pid = fork();
        if (pid == 0) {
                snprintf(cmd, sizeof(cmd),
                         "import threading, time\n"
                         "ev = threading.Event()\n"
                         "ts = [threading.Thread(target=ev.wait) for _ in range(2)]\n"
                         "[t.start() for t in ts]\n"
                         "open('%s', 'w').close()\n"
                         "time.sleep(30)\n",
                         ready);
                execl(python, python, "-c", cmd, (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 200 && access(ready, F_OK) < 0; i++)
                usleep(25000);
        struct seen s = {0};
        int n = fp_py_threads(pid, b, pie ? fp_test_map_start(pid, interp_file) : 0, on_thread, &s);
        printf("%s: %d thread states, %d with the kernel's tid\n", python, n, s.with_native);
        FP_CHECK_EQ_INT(n, 3);
        if (b->minor >= 11) {
                FP_CHECK_EQ_INT(s.with_native, 3);
                for (int i = 0; i < s.n && i < 16; i++) {
                        char task[64];
                        snprintf(task, sizeof(task), "/proc/%d/task/%d", pid, s.tids[i]);
                        FP_CHECK(access(task, F_OK) == 0);
                }
        }
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        unlink(ready);
}

/*
 * Each code object codeinfo.py describes, read through its memory: name,
 * file, first line, and the line of every instruction offset.
 */
static void check_code(const char *python, const struct fp_py_binary *b)
{
        char out[64], ready[64], line[1024], name[FP_PY_NAME_MAX], file[FP_PY_FILE_MAX];
        struct fp_py_code c = {0};
        size_t codes = 0, offsets = 0, wrong = 0;
        bool have = false;
        FILE *f;

        snprintf(out, sizeof(out), "/tmp/fp-test-pycode-%d.out", getpid());
        snprintf(ready, sizeof(ready), "/tmp/fp-test-pycode-%d.ready", getpid());
        unlink(ready);
        pid_t pid = fork();
        if (pid == 0) {
                execl(python, python, FP_TEST_DATA "/../workloads/python/codeinfo.py", out, ready,
                      (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 400 && access(ready, F_OK) < 0; i++)
                usleep(25000);
        f = fopen(out, "r");
        FP_CHECK(f != NULL);
        while (f && fgets(line, sizeof(line), f)) {
                unsigned long long addr;
                int first, off, want, n;
                line[strcspn(line, "\n")] = '\0';
                if (sscanf(line, "code %llu %d %n", &addr, &first, &n) == 2) {
                        char *tab = strchr(line + n, '\t');
                        FP_CHECK(tab != NULL);
                        if (!tab)
                                break;
                        snprintf(name, sizeof(name), "%.*s", (int)(tab - (line + n)), line + n);
                        snprintf(file, sizeof(file), "%s", tab + 1);
                        fp_py_code_free(&c);
                        have = fp_py_code_read(pid, b->layout, addr, &c) == 0;
                        FP_CHECK(have);
                        codes++;
                        if (!have)
                                continue;
                        FP_CHECK_EQ_STR(c.name, name);
                        FP_CHECK_EQ_STR(c.filename, file);
                        FP_CHECK_EQ_INT(c.firstlineno, first);
                } else if (have && sscanf(line, "line %d %d", &off, &want) == 2) {
                        int got = fp_py_line(b->layout, &c, (uint64_t)off);
                        offsets++;
                        if (got != want && wrong++ < 5)
                                printf("%s: %s at offset %d: line %d, Python says %d\n", python,
                                       c.name, off, got, want);
                }
        }
        fp_py_code_free(&c);
        if (f)
                fclose(f);
        printf("%s: %zu code objects read, %zu of %zu offsets on Python's line\n", python, codes,
               offsets - wrong, offsets);
        FP_CHECK_EQ_INT(codes, 6);
        FP_CHECK(offsets > 50);
        FP_CHECK_EQ_INT(wrong, 0);
        /* Not a code object: its fields do not read as str and bytes. */
        FP_CHECK(fp_py_code_read(pid, b->layout, 4096, &c) < 0);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        unlink(out);
        unlink(ready);
}

static void test_debian(void)
{
        struct fp_py_binary b;
        char why[512] = "";
        const char *py = "/usr/bin/python3.11";

        if (access(py, X_OK) < 0) {
                printf("SKIP: no %s\n", py);
                return;
        }
        FP_CHECK_EQ_INT(detect(py, &b, why, sizeof(why)), 1);
        FP_CHECK_EQ_INT(b.minor, 11);
        FP_CHECK(b.micro >= 0);
        FP_CHECK(b.runtime != 0 && b.eval_start != 0 && b.eval_end > b.eval_start);
        printf("%s: Python 3.%d.%d, _PyRuntime at 0x%llx\n", py, b.minor, b.micro,
               (unsigned long long)b.runtime);
        check_live(py, py, &b, false);
        check_code(py, &b);
}

static void test_pyenv(void)
{
        static const char *const versions[] = {"3.6",  "3.7",  "3.8",  "3.9",
                                               "3.10", "3.11", "3.12", "3.13"};
        bool have_gdb = system("command -v gdb >/dev/null 2>&1") == 0;

        if (!*pyenv) {
                printf("SKIP: no pyenv\n");
                return;
        }
        for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
                char find[1024], lib[1024] = "", python[1024] = "", why[512] = "";
                int minor = atoi(versions[i] + 2);
                snprintf(find, sizeof(find),
                         "ls -d %s/versions/%s.*/lib/libpython%s*.so.1.0 2>/dev/null | head -1",
                         pyenv, versions[i], versions[i]);
                FILE *p = popen(find, "r");
                if (!p || !fgets(lib, sizeof(lib), p)) {
                        if (p)
                                pclose(p);
                        printf("SKIP: no pyenv Python %s\n", versions[i]);
                        continue;
                }
                pclose(p);
                lib[strcspn(lib, "\n")] = '\0';
                snprintf(python, sizeof(python), "%.*s/bin/python%s",
                         (int)(strstr(lib, "/lib/libpython") - lib), lib, versions[i]);
                struct fp_py_binary b;
                int r = detect(lib, &b, why, sizeof(why));
                if (minor < FP_PY_MINOR_MIN) {
                        FP_CHECK_EQ_INT(r, -EPROTONOSUPPORT);
                        FP_CHECK(strstr(why, "does not read") != NULL);
                        printf("refused: %s\n", why);
                        continue;
                }
                FP_CHECK_EQ_INT(r, 1);
                FP_CHECK_EQ_INT(b.minor, minor);
                FP_CHECK(b.runtime != 0 && b.eval_start != 0);
                printf("%s: Python 3.%d (micro %d)\n", lib, b.minor, b.micro);
                if (have_gdb)
                        check_dwarf(minor, lib);
                check_live(python, lib, &b, true);
                check_code(python, &b);
        }
}

static void test_refused(void)
{
        struct fp_py_binary b;
        char why[512] = "", dir[] = "/tmp/fp-test-python-XXXXXX", fake[600];

        FP_CHECK(mkdtemp(dir) != NULL);
        /* A program that is no Python: not one, said nothing. */
        FP_CHECK_EQ_INT(detect("/bin/true", &b, why, sizeof(why)), 0);
        /* One that only looks like Python by its name. */
        snprintf(fake, sizeof(fake), "%s/python3.11", dir);
        FP_CHECK_EQ_INT(fp_test_run("cp /bin/true '%s'", fake), 0);
        FP_CHECK_EQ_INT(detect(fake, &b, why, sizeof(why)), -EPROTONOSUPPORT);
        FP_CHECK(strstr(why, "named like Python 3.11 but has no _PyRuntime") != NULL);
        printf("refused: %s\n", why);
        FP_CHECK(fp_py_layout_of(7) == NULL && fp_py_layout_of(14) == NULL);
        /* A frame's instruction as a byte offset: f_lasti in bytes, in code units, a pointer. */
        const struct fp_py_layout *l9 = fp_py_layout_of(9), *l10 = fp_py_layout_of(10),
                                  *l12 = fp_py_layout_of(12);
        FP_CHECK_EQ_INT(fp_py_instr_offset(l9, 0, 6), 6);
        FP_CHECK_EQ_INT(fp_py_instr_offset(l9, 0, (uint64_t)-1), UINT64_MAX); /* not started */
        FP_CHECK_EQ_INT(fp_py_instr_offset(l10, 0, 5), 10);
        FP_CHECK_EQ_INT(fp_py_instr_offset(l12, 0x1000, 0x1000 + 192 + 10), 10);
        FP_CHECK_EQ_INT(fp_py_instr_offset(l12, 0x1000, 0x1000 + 192 - 2), UINT64_MAX);
        fp_test_run("rm -rf '%s'", dir);
}

int main(void)
{
        FILE *p = popen("pyenv root 2>/dev/null", "r");
        if (p && fgets(pyenv, sizeof(pyenv), p))
                pyenv[strcspn(pyenv, "\n")] = '\0';
        if (p)
                pclose(p);
        if (*pyenv && access(pyenv, F_OK) < 0)
                pyenv[0] = '\0';
        elf_version(EV_CURRENT);
        test_debian();
        test_pyenv();
        test_refused();
        return FP_TEST_DONE();
}
