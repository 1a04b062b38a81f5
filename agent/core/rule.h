/* SPDX-License-Identifier: MIT */
/*
 * A rule: "profile every process that matches, now and later", with the
 * options a target would get from `agentctl start PID`. This module owns
 * what a rule is and how it matches; the core (core-rules.c) applies
 * rules to the processes that come and go.
 *
 * A rule selects processes by exactly one of:
 *
 *   --name REGEX   the process name (/proc/PID/comm, what pgrep matches), a
 *                  POSIX extended regular expression, unanchored
 *   --exe PATH     the executable (/proc/PID/exe), the path as given or
 *                  with its symbolic links resolved
 *   --unit UNIT    the systemd unit whose cgroup holds the process (a name
 *                  without a suffix means UNIT.service); matches the unit's
 *                  cgroup and the cgroups below it
 *   --cgroup PATH  the cgroup v2 directory and those below it, given as
 *                  /proc/PID/cgroup shows it (/system.slice/x.service) or
 *                  under the hierarchy's mount point (/sys/fs/cgroup, or
 *                  /sys/fs/cgroup/unified on a "hybrid" system)
 *
 * A rule of a user other than root matches only that user's processes.
 *
 * Its samples are stored under a service name, so that successive
 * processes merge: --service NAME, or by default the unit's name without
 * ".service", the executable's file name, the cgroup directory's name,
 * or (for --name) each process's executable file name.
 *
 * The text of a rule is its start request (ctl.h: "key=value" lines,
 * without "cmd"), which the store keeps for rules added with agentctl so
 * that a restarted agent resumes them; a configuration file's
 * `target = --name nginx --freq 99` line is the same options as words.
 */
#pragma once

#include "ctl.h"
#include "perf.h"
#include "target.h"

#include <limits.h>
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_RULE_MAX_PROCESSES_DEFAULT 64   /* running targets of one rule */
#define FP_RULE_MAX_PROCESSES_LIMIT   4096 /* the most --max-processes may ask */
#define FP_RULE_MATCH_MAX             1024 /* bytes of a --name, --exe, --unit or --cgroup */

enum fp_rule_kind {
        FP_RULE_NAME,
        FP_RULE_EXE,
        FP_RULE_UNIT,
        FP_RULE_CGROUP,
};

/* What of a process the matching needs (fp_rule_read_proc()). */
#define FP_RULE_NEED_EXE    1u
#define FP_RULE_NEED_CGROUP 2u

/* A process as rules see it. */
struct fp_rule_proc {
        pid_t pid;
        uid_t owner;
        uint64_t starttime;
        char comm[16];
        char exe[PATH_MAX];    /* "" when not read or unreadable; no " (deleted)" */
        char cgroup[PATH_MAX]; /* the cgroup v2 path ("/system.slice/x.service"), "" unknown */
};

struct fp_rule {
        int64_t id;
        uid_t owner;
        bool from_config; /* declared in the configuration file: not kept in the store */
        enum fp_rule_kind kind;
        char match[FP_RULE_MATCH_MAX + 1]; /* as the kind wants it (a unit with its suffix) */
        char exe_real[PATH_MAX];           /* --exe: the path with its links resolved */
        regex_t re;                        /* --name */
        bool have_re;
        char service[FP_TARGET_SERVICE_MAX + 1]; /* "": per process (--name without --service) */
        bool follow;
        unsigned max_processes;
        struct fp_perf_config cfg;
        char *spec; /* the rule's text: its start request without cmd */
};

/*
 * The sampling options of a start request (event, freq, period, kernel,
 * best_effort, follow, unwind) into *cfg and *ret_follow, finished with
 * fp_targetconf_finish(). 0, or -EINVAL with one line for the user in err.
 * `agentctl start PID` and rules share it.
 */
int fp_rule_sampling_from_request(const struct fp_ctl_request *q, struct fp_perf_config *cfg,
                                  bool *ret_follow, char *err, size_t err_len);

/*
 * Gives user uid (asking through process peer: its capabilities count;
 * 0: none known) exactly what the kernel would: at perf_event_paranoid 2
 * or more without CAP_PERFMON or CAP_SYS_ADMIN, no kernel-mode samples
 * or counts (cfg->count_kernel cleared; --kernel refused with -EACCES),
 * and at 3 (Debian's default) no profiling at all (-EACCES). Root gets
 * everything. 0, or -EACCES with one line in err.
 */
int fp_rule_user_rights(struct fp_perf_config *cfg, uid_t uid, pid_t peer, char *err,
                        size_t err_len);

/* Whether a start request asks for a rule (has name, exe, unit or cgroup). */
bool fp_rule_requested(const struct fp_ctl_request *q);

/*
 * A rule of owner from a start request. Checks everything (one selector,
 * a valid regular expression, an absolute --exe, a unit name, a cgroup
 * path that exists, a service name, the sampling options). 0, or -EINVAL
 * (-ENOENT: the cgroup does not exist; -EOPNOTSUPP: no cgroup v2) with one
 * line in err. *ret is the caller's: fp_rule_free().
 */
int fp_rule_new(const struct fp_ctl_request *q, uid_t owner, struct fp_rule **ret, char *err,
                size_t err_len);
/* The same from a rule's text (as fp_rule.spec holds it). */
int fp_rule_from_spec(const char *spec, uid_t owner, struct fp_rule **ret, char *err,
                      size_t err_len);
void fp_rule_free(struct fp_rule *r);

/*
 * A configuration file's target line ("--name nginx --freq 99 --service
 * web") into a start request. Words are separated by blanks; a word in
 * single quotes keeps its blanks ('api worker'). 0, or -EINVAL with one
 * line in err; q is the caller's (fp_ctl_request_done()).
 */
int fp_rule_request_from_words(const char *line, struct fp_ctl_request *q, char *err,
                               size_t err_len);
/* Checks a configuration file's target line as the agent will read it. */
int fp_rule_check_words(const char *line, char *err, size_t err_len);

/* The options of `agentctl start` and the request key each sets. */
struct fp_start_option {
        const char *flag; /* "--freq" */
        const char *key;  /* "freq" */
        bool has_value;   /* false: a switch, sent as "1" */
};
/* The option named flag, or NULL. */
const struct fp_start_option *fp_start_option_find(const char *flag);

/* What rules need to read of a process: FP_RULE_NEED_* of its kind. */
unsigned fp_rule_needs(const struct fp_rule *r);
/*
 * Reads pid's owner, start time and name, and what need asks for. 0, or
 * -errno when the process is gone (or not readable).
 */
int fp_rule_read_proc(pid_t pid, unsigned need, struct fp_rule_proc *ret);
/* Whether the rule selects the process (its owner's rights included). */
bool fp_rule_matches(const struct fp_rule *r, const struct fp_rule_proc *p);
/* The service the process's samples are stored under (see above). */
void fp_rule_service_of(const struct fp_rule *r, const struct fp_rule_proc *p, char *buf,
                        size_t len);
/* The selector as the user typed it: "--name '^nginx$'". */
void fp_rule_describe(const struct fp_rule *r, char *buf, size_t len);
const char *fp_rule_kind_name(enum fp_rule_kind kind);
