/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of how a JVM's options are read for -XX:+PreserveFramePointer
 * (agent/runtimes/hotspot/jvmattach.c): from a command line and an environment as
 * /proc gives them, HotSpot's order kept (JAVA_TOOL_OPTIONS, then
 * JDK_JAVA_OPTIONS, the command line up to the main class, then
 * _JAVA_OPTIONS; the last one wins), program arguments and option values
 * not taken for options; and from a real process's /proc.
 */
#include "jvmattach.h"
#include "fp-test.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* src (at most 511 bytes) into dst with each '|' a NUL; its length. */
static size_t nul_separated(char dst[512], const char *src)
{
        size_t n = strlen(src);

        for (size_t i = 0; i <= n; i++)
                dst[i] = src[i] == '|' ? 0 : src[i];
        return n;
}

/* cmd and env are NUL-separated lists written with '|' for the NULs. */
static int fps(const char *cmd, const char *env)
{
        char c[512], e[512];
        size_t cl = nul_separated(c, cmd), el = nul_separated(e, env);

        return fp_jvm_frame_pointers_in(c, cl, e, el);
}

int main(void)
{
        /* The default: off. */
        FP_CHECK_EQ_INT(fps("java|-cp|x|Main", "HOME=/root"), 0);
        FP_CHECK_EQ_INT(fps("", ""), 0);
        /* On the command line, the last one winning. */
        FP_CHECK_EQ_INT(fps("java|-XX:+PreserveFramePointer|Main", ""), 1);
        FP_CHECK_EQ_INT(fps("java|-XX:+PreserveFramePointer|-XX:-PreserveFramePointer|Main", ""),
                        0);
        FP_CHECK_EQ_INT(fps("java|-Xmx1g|-XX:+PreserveFramePointer|-jar|app.jar", ""), 1);
        /* Not an option: the program's arguments, a class path's value, a longer flag. */
        FP_CHECK_EQ_INT(fps("java|Main|-XX:+PreserveFramePointer", ""), 0);
        FP_CHECK_EQ_INT(fps("java|-jar|app.jar|-XX:+PreserveFramePointer", ""), 0);
        FP_CHECK_EQ_INT(fps("java|-cp|-XX:+PreserveFramePointer|Main", ""), 0);
        FP_CHECK_EQ_INT(fps("java|-cp|x|-XX:+PreserveFramePointer|Main", ""), 1);
        FP_CHECK_EQ_INT(fps("java|-XX:+PreserveFramePointerX|Main", ""), 0);
        FP_CHECK_EQ_INT(fps("java|-XX:+PreserveFramePointe|Main", ""), 0);
        /* The environment: JAVA_TOOL_OPTIONS and JDK_JAVA_OPTIONS before the command line... */
        FP_CHECK_EQ_INT(fps("java|Main", "A=1|JAVA_TOOL_OPTIONS=-Xss1m  -XX:+PreserveFramePointer"),
                        1);
        FP_CHECK_EQ_INT(fps("java|Main", "JDK_JAVA_OPTIONS=-XX:+PreserveFramePointer"), 1);
        FP_CHECK_EQ_INT(fps("java|-XX:-PreserveFramePointer|Main",
                            "JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"),
                        0);
        FP_CHECK_EQ_INT(fps("java|Main", "JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer|"
                                         "JDK_JAVA_OPTIONS=-XX:-PreserveFramePointer"),
                        0);
        /* ... _JAVA_OPTIONS after it. */
        FP_CHECK_EQ_INT(
            fps("java|-XX:+PreserveFramePointer|Main", "_JAVA_OPTIONS=-XX:-PreserveFramePointer"),
            0);
        FP_CHECK_EQ_INT(fps("java|Main", "_JAVA_OPTIONS=\t-XX:+PreserveFramePointer\n"), 1);
        /* A variable whose name only ends like one is not it. */
        FP_CHECK_EQ_INT(fps("java|Main", "MY_JAVA_OPTIONS=-XX:+PreserveFramePointer"), 0);
        /* An unterminated last argument or variable is read to its end. */
        FP_CHECK_EQ_INT(fps("java|-cp", ""), 0);

        /* A real process: /proc's own command line and environment (the flag in the latter). */
        pid_t child = fork();
        if (child == 0) {
                char *argv[] = {"sleep", "30", NULL};
                char *envp[] = {"JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer", NULL};
                execve("/bin/sleep", argv, envp);
                _exit(127);
        }
        FP_CHECK(child > 0);
        for (int i = 0; i < 200 && fp_jvm_frame_pointers(child) != 1; i++)
                usleep(10000); /* until the exec is done */
        FP_CHECK_EQ_INT(fp_jvm_frame_pointers(child), 1);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        FP_CHECK_EQ_INT(fp_jvm_frame_pointers(child), -ESRCH);
        return FP_TEST_DONE();
}
