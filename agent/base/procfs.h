/* SPDX-License-Identifier: MIT */
/*
 * What the agent reads of a process in /proc: its start time and state,
 * its owner, one-line files (comm). Every reader returns -errno (or 0 for
 * "gone") rather than failing loudly: processes come and go at any time.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads a one-line /proc file into buf (len bytes) without its newline. */
int fp_proc_read_line(const char *path, char *buf, size_t len);
/*
 * Process start time (clock ticks since boot, /proc/PID/stat field 22), 0
 * when gone; *ret_state (when non-NULL) gets the state letter (R, S, Z, ...).
 */
uint64_t fp_proc_stat(pid_t pid, char *ret_state);
/* How long process pid has run (since its start, CLOCK_BOOTTIME), in ns; 0 when gone. */
uint64_t fp_proc_age_ns(pid_t pid);
/* The owner (uid of /proc/PID). -errno when the process is gone. */
int fp_proc_owner(pid_t pid, uid_t *ret);
/* Events the kernel counts per thread, as the software perf events of their names count them. */
enum fp_proc_events {
        FP_PROC_PAGE_FAULTS, /* minor and major (stat's minflt + majflt) */
        FP_PROC_MINOR_FAULTS,
        FP_PROC_MAJOR_FAULTS,
        FP_PROC_CONTEXT_SWITCHES, /* voluntary and not (status) */
};
/* How many of kind thread tid of pid has had since its birth: 0, -ESRCH (gone), -EIO. */
int fp_proc_thread_events(pid_t pid, pid_t tid, enum fp_proc_events kind, uint64_t *ret);
/* This process's resident memory in bytes (/proc/self/statm), 0 when unknown. */
uint64_t fp_proc_self_rss(void);
/* This process's CPU time, every thread, user and system, in ns. */
uint64_t fp_proc_self_cpu_ns(void);
/*
 * The process's executable (/proc/PID/exe) into buf, "" when it cannot be
 * read. 0, or -errno: -ENOENT for a kernel thread (it has none) or a
 * process gone.
 */
int fp_proc_exe(pid_t pid, char *buf, size_t len);
/*
 * The CPU time thread tid has run, in ns (/proc/PID/task/TID/schedstat's
 * first field, the scheduler's sum_exec_runtime). 0 when gone or unknown.
 */
uint64_t fp_proc_thread_cpu_ns(pid_t pid, pid_t tid);
/* The thread's name (/proc/PID/task/TID/comm; TID == PID: the process's). */
int fp_proc_comm(pid_t pid, pid_t tid, char *buf, size_t len);
/*
 * Where the cgroup v2 hierarchy is mounted into buf: /sys/fs/cgroup, or on
 * a "hybrid" system beside the v1 controllers (/sys/fs/cgroup/unified).
 * NULL when it is not mounted.
 */
const char *fp_proc_cgroup2_root(char *buf, size_t len);
/* The online CPUs ("0-3,6") into a bitmap of max entries: how many are online, or -ENOENT. */
int fp_proc_online_cpus(bool *online, int max);
