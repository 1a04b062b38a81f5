/* SPDX-License-Identifier: MIT */
/* libbpf's messages while loading: see bpflog.h. */
#include "bpflog.h"

#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char last[258] = ": "; /* ": " and the message; [2] == 0: none */

static int on_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
        if (level == LIBBPF_DEBUG)
                return 0;
        vsnprintf(last + 2, sizeof(last) - 2, fmt, ap);
        last[2 + strcspn(last + 2, "\n")] = 0;
        return 0;
}

void fp_bpflog_begin(void)
{
        last[2] = 0;
        libbpf_set_print(on_print);
}

void fp_bpflog_end(void)
{
        libbpf_set_print(NULL);
}

const char *fp_bpflog_suffix(void)
{
        return last[2] ? last : "";
}
