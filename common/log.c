/* SPDX-License-Identifier: MIT */
/*
 * fp_log: stderr in the foreground, syslog when daemonized; see log.h.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static const char *prog = "fleetprof";
static bool use_syslog;
static const int max_level = LOG_INFO; /* LOG_DEBUG is for builds that change this */

void fp_log_init(const char *program)
{
        prog = program;
}

void fp_log_to_syslog(void)
{
        openlog(prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
        use_syslog = true;
}

void fp_log(int level, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        if (level > max_level)
                return;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (use_syslog)
                syslog(level, "%s", msg);
        else
                fprintf(stderr, "%s: %s\n", prog, msg);
}
