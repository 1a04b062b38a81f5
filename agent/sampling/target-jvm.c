/* SPDX-License-Identifier: MIT */
/*
 * A JVM target's compiled methods named (jvmnames.h): a target whose
 * process maps libjvm.so and can be asked is asked for its perf map when
 * one of its samples lands in JIT code the map it has does not name, at
 * the pace target.h sets (FP_TARGET_JVM_*). The map the JVM writes is read by
 * perfmap.c at the next miss. Its stacks end at the first compiled method
 * when the JVM keeps no frame pointer there (stackwalk.h: jvm).
 *
 * Part of the target module: called by target.c (start, free, JIT
 * lookups) and threads.c (an exec).
 */
#include "target-internal.h"
#include "maps.h"

#include <stdio.h>

void fp_target_jvm_look(struct fp_target *t)
{
        t->jvm_looked_maps = fp_maps_count(t->maps);
        snprintf(t->jvm.comm, sizeof(t->jvm.comm), "%s", t->comm);
        fp_jvm_names_look(&t->jvm, fp_maps_live_file(t->maps, "libjvm.so"));
}

void fp_target_jvm_miss(struct fp_target *t)
{
        if (t->st.state != FP_TARGET_RUNNING)
                return;
        /*
         * Not a JVM when looked at: one started at its exec (a rule's) maps
         * libjvm.so only later, so it is looked at again once it has new
         * mappings.
         */
        if (t->jvm.state == 0 && fp_maps_count(t->maps) != t->jvm_looked_maps)
                fp_target_jvm_look(t);
        fp_jvm_names_miss(&t->jvm, t->maps);
}

void fp_target_jvm_free(struct fp_target *t)
{
        fp_jvm_names_free(&t->jvm);
}

void fp_target_jvm_status(const struct fp_target *t, struct fp_jvm_names_status *ret)
{
        fp_jvm_names_status(&t->jvm, ret);
}
