/* SPDX-License-Identifier: MIT */
/*
 * Counter groups in profiles: reading a sampling event together with the
 * counters that rode in its group, and showing them to people.
 *
 * In the store each counter of a group is an event of its own (count: the
 * samples, value: what the counter counted in them; see target.h), so a
 * profile of a target's group is assembled from several store queries:
 * the sampling event's profile, and each counter's values added as one
 * more sample type ("page-faults"/"count"). A target's config text names
 * its group ("event=cpu-clock,page-faults ..."), which says which stored
 * events are its counters.
 */
#pragma once

#include <stdio.h>

struct fp_pprof;
struct fp_store;
struct fp_store_filter;

/*
 * Adds to p the samples of f's event (f->event, or when NULL the
 * sampling event of the first matching target) and, for each matching
 * target that this event leads, its counters' values as further sample
 * types of the same samples. p may be empty or hold samples already
 * (the open bucket): sample types are matched by name, missing ones
 * appended. Meant for one host's store (an agent's): the counters of a
 * target are read per target. Returns the number of distinct samples of
 * the sampling event added (0: nothing matched, p unchanged), or -errno
 * (fp_store_errmsg() says what failed in the store).
 */
int fp_counters_query(struct fp_store *s, const struct fp_store_filter *f, struct fp_pprof *p);

/*
 * For `dump --format top`: when p has sample types beyond its first two
 * (counters), prints their totals (and, when p measures CPU time, their
 * rate per CPU-second), the ratios derived from counters that are both
 * present (IPC = instructions / cycles; cache-misses and branch-misses per
 * 1000 instructions), and a per-function table of the counters (flat, the
 * synthetic "[kernel]" leaf charged to the function below it), ordered by
 * sample type value_index, n rows (0: all). Prints nothing for a profile
 * without counters. Returns 0 or -errno.
 */
int fp_counters_write_top(const struct fp_pprof *p, size_t value_index, size_t n, FILE *out);
