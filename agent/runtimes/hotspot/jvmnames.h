/* SPDX-License-Identifier: MIT */
/*
 * One process's JVM names (jvmattach.h), for a target and for a process of
 * the host tier alike: whether it is a HotSpot JVM that can be asked, the
 * perf-map request under way, and when it may be asked again.
 *
 * A process whose samples land in JIT code its perf map does not name
 * (methods compile all the time) is asked to write it anew, at the pace
 * its struct fp_jvm_pace sets: after an answer not before a wait that
 * doubles from every_ns up to every_max_ns (a JVM compiles most while it
 * warms up), and from a bucket of burst requests that refills one every
 * refill_ns (a burst at once, then one every refill_ns). After a failure
 * it is not asked before a back-off that doubles from
 * FP_JVM_BACKOFF_MIN_NS to FP_JVM_BACKOFF_MAX_NS. A JVM whose
 * attach listener never starts (-XX:+DisableAttachMechanism: each signal
 * only prints a thread dump) is not asked after FP_JVM_SILENT_MAX such
 * requests. A miss that comes before the process may be asked again is
 * not forgotten: the request is made when it may be (code compiled just
 * after an answer would otherwise stay unnamed until another miss). A
 * refusal or the first failure is logged once per process.
 * Requests of one group (the host tier's processes) can share a bound on
 * how many are under way at once.
 *
 * Single-threaded: the agent's event loop.
 */
#pragma once

#include "hotspot.h"
#include "jvmattach.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_JVM_BACKOFF_MIN_NS 5000000000ULL   /* after a first failure */
#define FP_JVM_BACKOFF_MAX_NS 300000000000ULL /* at most */
#define FP_JVM_SILENT_MAX     2
/*
 * A JVM maps libjvm.so some time before it catches SIGQUIT: a process
 * younger than this that does not catch it yet is looked at again every
 * FP_JVM_LOOK_AGAIN_NS, and refused only once it is older.
 */
#define FP_JVM_YOUNG_NS      5000000000ULL
#define FP_JVM_LOOK_AGAIN_NS 500000000ULL

struct event_base;
struct event;
struct fp_maps;

/* How often a process may be asked (see above); burst 0: no bucket. */
struct fp_jvm_pace {
        uint64_t every_ns, every_max_ns;
        unsigned burst;
        uint64_t refill_ns;
};

/* Requests under way in a group, and how many may be (0: no bound). */
struct fp_jvm_group {
        unsigned pending, max;
};

struct fp_jvm_names {
        struct event_base *base;
        struct fp_jvm_group *group; /* NULL: none */
        pid_t pid;
        char comm[16];
        struct fp_jvm_pace pace;
        uint64_t wait_ns;   /* the next wait after an answer */
        uint64_t bucket_ns; /* what the bucket holds: refill_ns a request */
        uint64_t filled_ns; /* when it was last filled up to now */
        int state;          /* 0: not a JVM (or not looked), 1: asked on misses, -1: refused */
        char *libjvm;       /* its libjvm.so, while it is looked at again (young) */
        char why[240];      /* a refusal, or the last failure */
        struct fp_jvm_request req;
        struct event *ev;    /* req.fd readable */
        struct event *later; /* a miss to ask for when it may be (armed: one waits) */
        uint64_t next_ns;    /* not asked again before (CLOCK_MONOTONIC) */
        uint64_t backoff_ns; /* after a failure: doubled each time, up to the bound */
        unsigned silent;     /* requests in a row whose JVM never started its listener */
        uint64_t requests, answered, failed;
        uint64_t answers_read; /* answers the perf map was looked at after */
        int frame_pointers;    /* its compiled code keeps them: 1, 0, or -errno (not known) */
        /* Its interpreted methods' names (hotspot.h), read from its memory once asked. */
        struct fp_hotspot *hotspot;
        bool hotspot_tried;
        char hotspot_why[200]; /* why they cannot be read ("" while they can) */
        /* Its compiled code read from its code cache (hotspot.h): tried once, at the first need. */
        bool code_tried, code_ok;
};

/* What status shows of one. */
struct fp_jvm_names_status {
        int state;
        char why[240]; /* a refusal, or the last failure */
        uint64_t requests, answered, failed;
        bool pending;
        int frame_pointers; /* -XX:+PreserveFramePointer: 1, 0, or -errno (not known) */
        uint64_t methods_named, methods_failed; /* interpreted methods (Method* values) */
        char interpreted_why[200];              /* why they are not named ("" when they are) */
        bool code_cache;    /* compiled code named from the code cache (else the perf map) */
        char code_why[200]; /* why not ("" when it is, or not tried yet) */
        struct fp_hotspot_code_stats code;
};

void fp_jvm_names_init(struct fp_jvm_names *j, struct event_base *base, struct fp_jvm_group *group,
                       pid_t pid, const char *comm, const struct fp_jvm_pace *pace);
/*
 * Looks at the process anew (at its start, after an exec): libjvm is the
 * path of its libjvm.so mapping (NULL: none). A request under way is
 * given up. Returns the new state.
 */
int fp_jvm_names_look(struct fp_jvm_names *j, const char *libjvm);
/*
 * A sample in JIT code its map does not name: asks, when it is one to ask
 * and it is due, and its compiled code is not read from its code cache
 * (maps: its mappings, for libjvm.so).
 */
void fp_jvm_names_miss(struct fp_jvm_names *j, struct fp_maps *maps);
/*
 * Whether JVMs' compiled code is read from their code caches (the default)
 * or named from perf maps only (java-names = perf-map): one setting for
 * the agent, made at its start.
 */
void fp_jvm_names_set_code_cache(bool on);
/*
 * What the JVM's code cache says of code address pc (hotspot.h's
 * fp_hotspot_code_at()): 1 and *ret, or 0 when it does not say (not a JVM
 * whose code cache is read, or no blob there), -ESRCH when it is gone.
 */
int fp_jvm_names_code(struct fp_jvm_names *j, struct fp_maps *maps, uint64_t pc, bool leaf,
                      struct fp_hotspot_code *ret);
/*
 * The name of an interpreted method of the JVM (a Method* its interpreter
 * keeps), read from its memory (hotspot.h, the layouts read at the first
 * call; maps: its mappings, for libjvm.so); NULL when not one that can be
 * asked, or unknown.
 */
const char *fp_jvm_names_method(struct fp_jvm_names *j, struct fp_maps *maps, uint64_t method);
/* Gives up a request under way (kills its helper) and what was read of its methods. */
void fp_jvm_names_free(struct fp_jvm_names *j);
void fp_jvm_names_status(const struct fp_jvm_names *j, struct fp_jvm_names_status *ret);
/*
 * The name of JIT code at addr: from the JVM's code cache when it is read
 * (a stub's or the interpreter's blob name, a compiled method's name), else
 * from the process's perf map m, or NULL; the first lookup after each
 * answer reads the map anew, whenever it was last read. j: the process's
 * JVM, or NULL when it is not known as one.
 */
struct fp_perfmap;
const char *fp_jvm_names_jit(struct fp_jvm_names *j, struct fp_perfmap *m, uint64_t addr);
