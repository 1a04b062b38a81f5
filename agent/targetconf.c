/* SPDX-License-Identifier: MIT */
/*
 * The target configuration text; see targetconf.h for the format.
 */
#include "targetconf.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void fp_targetconf_format(const struct fp_perf_config *cfg, bool follow, char *buf, size_t len)
{
        char events[FP_PERF_EVENT_LIST_MAX];
        fp_perf_event_list_string(cfg, events, sizeof(events));
        snprintf(buf, len, "event=%s freq=%" PRIu64 " period=%" PRIu64 " kernel=%d%s", events,
                 cfg->freq, cfg->period, cfg->kernel_frames ? 1 : 0, follow ? " follow=1" : "");
}

void fp_targetconf_finish(struct fp_perf_config *cfg)
{
        uint64_t hz = cfg->freq;
        if (!hz)
                hz = fp_perf_event_is_clock(&cfg->event) && cfg->period
                         ? 1000000000ULL / cfg->period
                         : 1000;
        cfg->count_kernel = true;
        cfg->ring_pages = fp_perf_ring_pages_for(hz);
}

int fp_targetconf_parse(const char *text, struct fp_perf_config *cfg, bool *ret_follow)
{
        char ev[FP_PERF_EVENT_LIST_MAX], rest[16] = "";
        unsigned long long freq, period;
        int kernel, n;
        struct fp_perf_config c = {0};

        static_assert(FP_PERF_EVENT_LIST_MAX == 256, "the %255s below");
        n = sscanf(text, "event=%255s freq=%llu period=%llu kernel=%d %15s", ev, &freq, &period,
                   &kernel, rest);
        if (n < 4 || (n == 5 && strcmp(rest, "follow=1") != 0))
                return -EINVAL;
        if (fp_perf_event_list_parse(ev, &c, NULL, 0) < 0 || (freq == 0) == (period == 0) ||
            freq > FP_PERF_MAX_FREQ)
                return -EINVAL;
        c.freq = freq;
        c.period = period;
        c.kernel_frames = kernel != 0;
        fp_targetconf_finish(&c);
        *cfg = c;
        if (ret_follow)
                *ret_follow = n == 5;
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
