/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of perf map reading (agent/runtimes/perfmap.c), with real
 * processes writing their own /tmp/perf-PID.map:
 *
 * - a map that grows while it is read: a half-written last line is not
 *   taken (its name would be cut), and is read whole once finished;
 * - a map written anew (as jcmd Compiler.perfmap does), longer or shorter;
 * - a later line for the same code wins;
 * - misses re-read at most every FP_PERFMAP_RECHECK_NS;
 * - after the process exits, the map it left is still read (it shared the
 *   agent's /tmp), but not one another user planted for its PID;
 * - a symlink, a FIFO and malformed lines are refused without harm.
 */
#include "perfmap.h"
#include "fp-test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A child that waits to be killed; its map is written by the test, as its runtime would. */
static pid_t spawn(void)
{
        pid_t pid = fork();
        if (pid == 0) {
                for (;;)
                        pause();
        }
        return pid;
}

static void reap(pid_t pid)
{
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

static void map_path(pid_t pid, char *buf, size_t len)
{
        snprintf(buf, len, "/tmp/perf-%d.map", (int)pid);
}

static void write_at(const char *path, const char *text, bool append)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
        FP_CHECK(fd >= 0);
        if (fd >= 0) {
                FP_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
                close(fd);
        }
}

static void wait_recheck(void)
{
        struct timespec ts = {0, (long)FP_PERFMAP_RECHECK_NS + 20000000L};
        nanosleep(&ts, NULL);
}

static void test_growing(void)
{
        char path[64];
        pid_t pid = spawn();
        map_path(pid, path, sizeof(path));
        struct fp_perfmap *m = fp_perfmap_new(pid);
        FP_CHECK(m != NULL);

        write_at(path, "1000 100 first\n2000 100 secon", false);
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x1010), "first");
        /* Half a line: not a name yet. */
        FP_CHECK(fp_perfmap_lookup(m, 0x2010) == NULL);
        write_at(path, "d_function\n3000 10 third\n", true);
        /* Within the recheck gap a miss does not read. */
        FP_CHECK(fp_perfmap_lookup(m, 0x2010) == NULL);
        wait_recheck();
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x2010), "second_function");
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x3005), "third");
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x1000), "first");
        FP_CHECK_EQ_INT((int)fp_perfmap_reads(m), 2);

        /* Code freed and compiled anew at the same place: the later line wins. */
        write_at(path, "2000 80 recompiled\n", true);
        wait_recheck();
        FP_CHECK(fp_perfmap_lookup(m, 0x9999) == NULL); /* a miss reads on */
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x2010), "recompiled");
        /* A longer older entry still covers past the newer, shorter one. */
        write_at(path, "4000 1000 big\n4100 10 small\n", true);
        wait_recheck();
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x4105), "small");
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x4500), "big");

        /* Written anew (jcmd): longer, then shorter; the old names go. */
        wait_recheck();
        write_at(path, "5000 100 anew_one\n6000 100 anew_two\n7000 100 anew_three_longer_name\n",
                 false);
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x5010), "anew_one");
        FP_CHECK(fp_perfmap_lookup(m, 0x1010) == NULL);
        wait_recheck();
        write_at(path, "8000 100 short\n", false);
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x8010), "short");
        FP_CHECK(fp_perfmap_lookup(m, 0x5010) == NULL);

        fp_perfmap_free(m);
        reap(pid);
        unlink(path);
}

/* The map of a process that has exited is read from /tmp, if its user's. */
static void test_after_exit(void)
{
        char path[64];
        pid_t pid = spawn();
        map_path(pid, path, sizeof(path));
        struct fp_perfmap *m = fp_perfmap_new(pid);

        write_at(path, "1000 100 before_exit\n", false);
        reap(pid); /* nothing was looked up while it lived */
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x1010), "before_exit");
        fp_perfmap_free(m);
        unlink(path);

        if (geteuid() != 0) {
                printf("# not root: the planted map's case skipped\n");
                return;
        }
        pid = spawn();
        map_path(pid, path, sizeof(path));
        m = fp_perfmap_new(pid);
        reap(pid);
        /* Another user's file for the dead PID. */
        write_at(path, "1000 100 planted\n", false);
        FP_CHECK_EQ_INT(chown(path, 65534, 65534), 0);
        FP_CHECK(fp_perfmap_lookup(m, 0x1010) == NULL);
        fp_perfmap_free(m);
        unlink(path);
}

/*
 * A map older than the process is an earlier process's of the same PID
 * (left in /tmp: PIDs come round): not read, until the process writes its own.
 */
static void test_stale(void)
{
        char path[64];
        pid_t pid = spawn();
        map_path(pid, path, sizeof(path));
        write_at(path, "1000 100 earlier_process\n", false);
        struct timespec old[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
        FP_CHECK_EQ_INT(utimensat(AT_FDCWD, path, old, 0), 0);
        struct fp_perfmap *m = fp_perfmap_new(pid);
        FP_CHECK(fp_perfmap_lookup(m, 0x1010) == NULL);
        wait_recheck();
        write_at(path, "1000 100 its_own\n", false);
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x1010), "its_own");
        fp_perfmap_free(m);
        reap(pid);
        unlink(path);
}

static void test_hostile(void)
{
        char path[64];
        pid_t pid = spawn();
        map_path(pid, path, sizeof(path));
        struct fp_perfmap *m = fp_perfmap_new(pid);

        /* A symlink to a real map: not followed. */
        write_at("/tmp/fp-test-perfmap-target", "1000 100 through_link\n", false);
        unlink(path);
        FP_CHECK_EQ_INT(symlink("/tmp/fp-test-perfmap-target", path), 0);
        FP_CHECK(fp_perfmap_lookup(m, 0x1010) == NULL);
        FP_CHECK_EQ_INT(fp_perfmap_load(m, path), -ELOOP);
        unlink(path);
        unlink("/tmp/fp-test-perfmap-target");

        /* A FIFO: refused without blocking. */
        FP_CHECK_EQ_INT(mkfifo(path, 0644), 0);
        FP_CHECK_EQ_INT(fp_perfmap_load(m, path), -EINVAL);
        unlink(path);

        /* Malformed lines are skipped; a name past the limit is cut. */
        char line[FP_PERFMAP_MAX_NAME * 2 + 64];
        int n = snprintf(line, sizeof(line),
                         "zz 10 bad\n1000 0 empty\n1000\n-5 10 neg\nffffffffffffffff 10 wraps\n"
                         "2000 10 ");
        memset(line + n, 'x', FP_PERFMAP_MAX_NAME * 2 - 64);
        strcpy(line + n + FP_PERFMAP_MAX_NAME * 2 - 64, "\n3000 10 fine\n");
        write_at(path, line, false);
        FP_CHECK_EQ_INT(fp_perfmap_load(m, path), 0);
        FP_CHECK(fp_perfmap_lookup(m, 0x1000) == NULL);
        const char *cut = fp_perfmap_lookup(m, 0x2000);
        FP_CHECK(cut && strlen(cut) == FP_PERFMAP_MAX_NAME);
        FP_CHECK_EQ_STR(fp_perfmap_lookup(m, 0x3000), "fine");
        fp_perfmap_free(m);
        reap(pid);
        unlink(path);
}

int main(void)
{
        test_growing();
        test_after_exit();
        test_stale();
        test_hostile();
        return FP_TEST_DONE();
}
