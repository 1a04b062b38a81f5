/* SPDX-License-Identifier: MIT */
/*
 * The target configuration text; see targetconf.h for the format.
 */
#include "targetconf.h"
#include "offcpu.h"
#include "unwind.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fp_targetconf_format(const struct fp_perf_config *cfg, bool follow, char *buf, size_t len)
{
        char events[FP_PERF_EVENT_LIST_MAX];
        fp_perf_event_list_string(cfg, events, sizeof(events));
        char off[40] = "";
        if (cfg->off_cpu_period)
                snprintf(off, sizeof(off), " off_cpu=%" PRIu64, cfg->off_cpu_period);
        snprintf(buf, len,
                 "event=%s freq=%" PRIu64 " period=%" PRIu64 " kernel=%d unwind=%s%s%s%s%s%s%s%s",
                 events, cfg->freq, cfg->period, cfg->kernel_frames ? 1 : 0,
                 fp_unwind_mode_name(cfg->unwind), follow ? " follow=1" : "", off,
                 cfg->no_python ? " python=0" : "", cfg->no_php ? " php=0" : "",
                 cfg->no_ruby ? " ruby=0" : "", cfg->no_perl ? " perl=0" : "",
                 cfg->no_javascript ? " javascript=0" : "");
}

void fp_targetconf_set_stack(struct fp_perf_config *cfg, uint32_t stack_bytes)
{
        uint64_t hz = cfg->freq;
        if (!hz)
                hz = fp_perf_event_is_clock(&cfg->event) && cfg->period
                         ? 1000000000ULL / cfg->period
                         : 1000;
        cfg->stack_bytes = stack_bytes;
        cfg->ring_pages =
            fp_perf_ring_pages_for_bytes(hz, 600 + cfg->stack_bytes, FP_PERF_THREAD_RING_MS);
        /* A ring that holds a second: the tick drains it, it wakes the agent each 7/8 written. */
        uint64_t ring = (uint64_t)cfg->ring_pages * (uint64_t)sysconf(_SC_PAGESIZE);
        cfg->ring_wake_bytes =
            ring >= hz * (600 + cfg->stack_bytes) ? (uint32_t)(ring - ring / 8) : 0;
}

void fp_targetconf_finish(struct fp_perf_config *cfg)
{
        cfg->count_kernel = true;
        /* The kernel's walk of the user frame pointers: only fp reads it. */
        cfg->no_user_chain = cfg->unwind != FP_UNWIND_FP;
        /* fp needs a copy only for the leaf fix-up; auto and dwarf unwind from it. */
        fp_targetconf_set_stack(cfg, cfg->unwind == FP_UNWIND_FP ? FP_UNWIND_LEAF_BYTES
                                                                 : FP_PERF_STACK_BYTES);
}

int fp_targetconf_parse(const char *text, struct fp_perf_config *cfg, bool *ret_follow)
{
        char ev[FP_PERF_EVENT_LIST_MAX], w[8][32] = {"", "", "", "", "", "", "", ""};
        unsigned long long freq, period, off_cpu = 0;
        int kernel, n;
        bool follow = false, no_python = false, no_php = false, no_ruby = false, no_perl = false,
             no_javascript = false;
        unsigned unwind = FP_UNWIND_AUTO;
        struct fp_perf_config c = {0};

        static_assert(FP_PERF_EVENT_LIST_MAX == 256, "the %255s below");
        n = sscanf(text,
                   "event=%255s freq=%llu period=%llu kernel=%d %31s %31s %31s %31s %31s %31s %31s "
                   "%31s",
                   ev, &freq, &period, &kernel, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]);
        if (n < 4)
                return -EINVAL;
        for (int i = 0; i < n - 4; i++) {
                char *end;
                if (strcmp(w[i], "follow=1") == 0) {
                        follow = true;
                } else if (strcmp(w[i], "python=0") == 0) {
                        no_python = true;
                } else if (strcmp(w[i], "php=0") == 0) {
                        no_php = true;
                } else if (strcmp(w[i], "ruby=0") == 0) {
                        no_ruby = true;
                } else if (strcmp(w[i], "perl=0") == 0) {
                        no_perl = true;
                } else if (strcmp(w[i], "javascript=0") == 0) {
                        no_javascript = true;
                } else if (strncmp(w[i], "off_cpu=", 8) == 0) {
                        errno = 0;
                        off_cpu = strtoull(w[i] + 8, &end, 10);
                        if (errno || *end || !off_cpu || off_cpu > FP_OFFCPU_PERIOD_MAX)
                                return -EINVAL;
                } else if (strncmp(w[i], "unwind=", 7) != 0 ||
                           fp_unwind_mode_parse(w[i] + 7, &unwind) < 0) {
                        return -EINVAL;
                }
        }
        if (fp_perf_event_list_parse(ev, &c, NULL, 0) < 0 || (freq == 0) == (period == 0) ||
            freq > FP_PERF_MAX_FREQ)
                return -EINVAL;
        c.freq = freq;
        c.unwind = unwind;
        c.period = period;
        c.kernel_frames = kernel != 0;
        c.off_cpu_period = off_cpu;
        c.no_python = no_python;
        c.no_php = no_php;
        c.no_ruby = no_ruby;
        c.no_perl = no_perl;
        c.no_javascript = no_javascript;
        fp_targetconf_finish(&c);
        *cfg = c;
        if (ret_follow)
                *ret_follow = follow;
        return 0;
}

void fp_targetconf_event(const char *text, size_t i, char *buf, size_t len)
{
        const char *p = text ? strstr(text, "event=") : NULL;

        buf[0] = 0;
        if (!p || len == 0)
                return;
        p += strlen("event=");
        for (;;) {
                size_t n = strcspn(p, ", ");
                if (i == 0) {
                        snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
                        return;
                }
                if (p[n] != ',')
                        return;
                p += n + 1;
                i--;
        }
}
