/* SPDX-License-Identifier: MIT */
/*
 * The agent's periodic timers (buckets, the bridge's check, each target's
 * rescan) fire at whole seconds of the wall clock, so that they share one
 * wake-up instead of each costing its own.
 */
#pragma once

#include <event2/event.h>
#include <stdint.h>
#include <sys/time.h>

/*
 * From now_ns (CLOCK_REALTIME) to the next multiple of every_s seconds. A
 * boundary less than a tenth of the period away is skipped: a timer that
 * fired a little before the boundary it aimed at would otherwise come
 * again a few milliseconds on.
 */
static inline struct timeval fp_tick_until(uint64_t now_ns, unsigned every_s)
{
        uint64_t len = (uint64_t)(every_s ? every_s : 1) * 1000000000ULL;
        uint64_t next = (now_ns / len + 1) * len;

        if (next - now_ns < len / 10)
                next += len;
        return (struct timeval){.tv_sec = (time_t)((next - now_ns) / 1000000000ULL),
                                .tv_usec = (suseconds_t)((next - now_ns) % 1000000000ULL / 1000)};
}

/*
 * Arms timer ev for the next multiple of every_s seconds. The time is the
 * one libevent cached at the top of its loop, from which it counts the
 * timeout: so every timer armed for a boundary fires at the same instant.
 */
static inline void fp_tick_arm(struct event *ev, unsigned every_s)
{
        struct timeval now;

        event_base_gettimeofday_cached(event_get_base(ev), &now);
        struct timeval tv = fp_tick_until(
            (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_usec * 1000ULL, every_s);
        event_add(ev, &tv);
}
