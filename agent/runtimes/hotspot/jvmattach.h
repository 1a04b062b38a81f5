/* SPDX-License-Identifier: MIT */
/*
 * Asking a HotSpot JVM for its compiled methods' names: through its attach
 * mechanism, the JVM writes /tmp/perf-PID.map (the diagnostic command
 * Compiler.perfmap, JDK 17 and later), which perfmap.c reads. Nothing is
 * added to the JVM's command line and nothing is loaded into it.
 *
 * The attach mechanism (HotSpot's, as jcmd uses it): the JVM listens on
 * the UNIX socket /tmp/.java_pidPID once started, which it does when it
 * receives SIGQUIT while the file /tmp/.attach_pidPID, owned by its user,
 * exists. A request is "1\0jcmd\0COMMAND\0\0\0"; the answer is a result
 * code, a newline, then the command's output. The JVM accepts a peer of
 * its own effective user and group (or root).
 *
 * How fleetprof does it. A request is a helper process, forked so that the
 * agent's loop never waits on the JVM: it bounds itself to
 * FP_JVM_REQUEST_SECONDS, reaches the JVM's /tmp through /proc/PID/root
 * (the JVM's own mount namespace, under the PID the JVM knows itself by)
 * without following a symbolic link, creates the trigger file there as
 * the JVM's user, signals, waits for the socket, removes the trigger, and
 * connects and asks as the JVM's user (its groups dropped): nothing is
 * written outside the JVM's /tmp and no file is read or written as root
 * that the JVM's user could have put a link in place of. It answers in
 * one line on a pipe, which the agent's loop watches.
 *
 * A process is asked only if it is one that can answer: it maps a file
 * named libjvm.so and catches SIGQUIT (HotSpot's handler; a JVM run with
 * -Xrs, or a process that only maps a file so named, would be killed by
 * the signal: fp_jvm_check() refuses it, with one line, and it is never
 * signalled).
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define FP_JVM_REQUEST_SECONDS 10 /* a helper gives up (and is killed) after this */

/*
 * Whether process pid can be asked: 1 when it maps libjvm.so and catches
 * SIGQUIT, 0 when it does not map libjvm.so, -errno with one line in why
 * (-EPERM: it maps libjvm.so but does not catch SIGQUIT). libjvm is the
 * path of its libjvm.so mapping (NULL: none).
 */
int fp_jvm_check(pid_t pid, const char *libjvm, char *why, size_t len);

/*
 * Whether a JVM's compiled methods keep their frame pointer
 * (-XX:+PreserveFramePointer; off by default): 1 or 0 as its options say,
 * -errno when they cannot be read. The options are read as HotSpot takes
 * them, the last one winning: JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS (the
 * launcher's), the command line's up to the main class or jar, then
 * _JAVA_OPTIONS. (Options in a file, -XX:Flags= or -XX:VMOptionsFile=,
 * or an @argfile, are not read.)
 */
int fp_jvm_frame_pointers(pid_t pid);
/*
 * The same from a process's command line and environment as /proc gives
 * them (NUL-separated, cmdline[0] the program), for tests.
 */
int fp_jvm_frame_pointers_in(const char *cmdline, size_t cmdline_len, const char *environ,
                             size_t environ_len);

/* A request under way: its helper and the read end of its answer. */
struct fp_jvm_request {
        pid_t helper; /* 0: none */
        int fd;       /* -1: none */
};

/*
 * Starts asking process pid to write its perf map. 0 with *ret (watch
 * ret->fd: readable once the helper is done), or -errno with one line in
 * err.
 */
int fp_jvm_request_perfmap(pid_t pid, struct fp_jvm_request *ret, char *err, size_t len);
/*
 * The helper's answer, once ret->fd is readable: 0 when the JVM wrote its
 * map, else -errno with the one line in err (-ETIMEDOUT: its attach
 * listener did not start after the signal; -ETIME: no answer in
 * FP_JVM_REQUEST_SECONDS). Reaps the helper and closes the fd; r is then
 * none.
 */
int fp_jvm_request_finish(struct fp_jvm_request *r, char *err, size_t len);
/* Gives up on a request (its target stops): kills and reaps the helper. */
void fp_jvm_request_cancel(struct fp_jvm_request *r);
