/* SPDX-License-Identifier: MIT */
/*
 * Logging for fleetprof's programs: one fp_log() that names the program
 * once. In the foreground a message is one line on stderr, "PROGRAM:
 * message"; once a program daemonizes (fp_log_to_syslog()) messages go to
 * syslog with the same program name, so the journal keeps them. Levels are
 * syslog's (LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO, LOG_DEBUG);
 * LOG_DEBUG lines are dropped.
 *
 * Libraries never log (they return -errno and a line of text); programs
 * log where they handle an error. Safe to call from any thread: each
 * message is written with one call.
 */
#pragma once

#include <stdbool.h>
#include <syslog.h>

/* Names the program ("fleetprof-agent"); the string must outlive the log. */
void fp_log_init(const char *program);
/* From now on messages go to syslog (facility daemon) instead of stderr. */
void fp_log_to_syslog(void);

void fp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
