/* SPDX-License-Identifier: MIT */
/*
 * The target configuration as text: how a target was started, stored with
 * every bucket (the store's targets.config column) so that a restarted
 * agent can resume it and readers can tell a group's counters from its
 * leader. This module is the one owner of the format:
 *
 *   event=EVENT[,COUNTER...] freq=HZ period=N kernel=0|1[ unwind=MODE][ follow=1][ off_cpu=T]
 *   [ python=0][ php=0][ ruby=0][ perl=0][ javascript=0]
 *
 * freq and period: exactly one is non-zero. unwind is auto, fp or dwarf
 * (unwind.h; texts written before it existed mean auto). follow=1 is
 * present only when the target's child processes are followed, off_cpu=T
 * only when its off-CPU time is profiled too (T ns, offcpu.h), python=0
 * (php=0, ruby=0, perl=0, javascript=0) only when its Python stacks (PHP's,
 * Ruby's, Perl's, JavaScript frames) are not read (--no-python, ...). Words are
 * separated by one space; event names never hold spaces or commas.
 */
#pragma once

#include "perf.h"

#include <stdbool.h>
#include <stddef.h>

/* Writes cfg (and follow) as the text above into buf. */
void fp_targetconf_format(const struct fp_perf_config *cfg, bool follow, char *buf, size_t len);
/*
 * Parses the text back into *cfg (finished with fp_targetconf_finish())
 * and *ret_follow (may be NULL). -EINVAL when malformed; nothing is
 * written then.
 */
int fp_targetconf_parse(const char *text, struct fp_perf_config *cfg, bool *ret_follow);
/*
 * The i-th event name of the text's event list (0: the sampling leader)
 * into buf; "" past the end or when the text has no event list.
 */
void fp_targetconf_event(const char *text, size_t i, char *buf, size_t len);
/* Fills the ring size and defaults of a config whose events and rate are set. */
void fp_targetconf_finish(struct fp_perf_config *cfg);
/* Sets the user-stack copy's size, and the ring to hold samples of it. */
void fp_targetconf_set_stack(struct fp_perf_config *cfg, uint32_t stack_bytes);
