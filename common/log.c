/* SPDX-License-Identifier: MIT */
/*
 * fp_log: stderr in the foreground, syslog when daemonized; see log.h.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static const char *prog = "fleetprof";
static bool use_syslog;
static int max_level = LOG_INFO;

void fp_log_init(const char *program)
{
        prog = program;
}

void fp_log_to_syslog(void)
{
        openlog(prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
        use_syslog = true;
}

void fp_log_set_level(int level)
{
        max_level = level;
}

bool fp_log_syslog_active(void)
{
        return use_syslog;
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
