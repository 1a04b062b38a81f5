/* SPDX-License-Identifier: MIT */
/*
 * The bridge: a new thread's CPU from its birth until its own events sample
 * it. The tracker (tracker.h) puts each new thread and followed child of a
 * tracked process in its `bridged` map at fork, before it runs; a
 * cpu-clock event per online CPU, filtered by the tracker's BPF program,
 * writes samples only of those threads; the agent removes a thread from
 * the map once its own events are open. A per-CPU timer's phase has
 * nothing to do with a thread's start, so what it samples of a thread's
 * first moments is unbiased: each sample stands for one bridge period of
 * CPU. Its owner hands each sample on to the thread's target, which keeps
 * those before its own sampling began.
 *
 * Cost: one timer interrupt per online CPU per period while it is open
 * (and a map lookup in it), a map update per birth in the kernel and a
 * map delete (a syscall) per birth in the agent.
 */
#pragma once

#include "perf.h"

#include <stdint.h>

struct event_base;
struct fp_bridge;

/* A sample taken at period ns. */
typedef void (*fp_bridge_fn)(void *userdata, const struct fp_perf_sample *s, uint64_t period);
/* The rings want reading: the owner reads what must come first, then fp_bridge_drain(). */
typedef void (*fp_bridge_wake_fn)(void *userdata);

/*
 * Opens the bridge on every online CPU at period ns (cpu-clock, user
 * stacks as the template asks, no kernel frames), filtered by prog_fd.
 * Follows CPUs going on- and offline at fp_bridge_check_cpus(). It keeps
 * no timer: the owner drains what no ring woke it for (a ring wakes it at
 * a quarter full), and checks the CPUs, each second. 0 or -errno with one
 * line in err.
 */
int fp_bridge_new(struct event_base *base, const struct fp_perf_config *tmpl, uint64_t period,
                  int prog_fd, fp_bridge_fn fn, fp_bridge_wake_fn wake, void *userdata,
                  struct fp_bridge **ret, char *err, size_t err_len);
/* Reads every sample now in the rings. */
void fp_bridge_drain(struct fp_bridge *b);
/* Opens the CPUs that came online, closes (after draining) those that went. */
void fp_bridge_check_cpus(struct fp_bridge *b);
/* The bridge's period (ns). */
uint64_t fp_bridge_period(const struct fp_bridge *b);
/* Drains, then samples every period ns from now on. 0 or -errno. */
int fp_bridge_set_period(struct fp_bridge *b, uint64_t period);
/* CPUs it samples now. */
unsigned fp_bridge_cpus(const struct fp_bridge *b);
/* Samples it read (every thread's, kept or not by their targets). */
uint64_t fp_bridge_samples(const struct fp_bridge *b);
/* Samples the kernel could not write (a full ring). */
uint64_t fp_bridge_lost(const struct fp_bridge *b);
/* Closes everything. Accepts NULL. */
void fp_bridge_free(struct fp_bridge *b);
