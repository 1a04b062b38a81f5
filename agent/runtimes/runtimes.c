/* SPDX-License-Identifier: MIT */
/*
 * The language runtimes the agent names frames of, each in a folder of its
 * own here (python/, hotspot/), above the stacks floor and below sampling.
 *
 * The runtimes recognised by what their files hold (CPython by _PyRuntime,
 * PHP by executor_globals, Ruby by ruby_current_vm_ptr, Perl by
 * PL_current_context)
 * have an inspector each in the table below, which the symbol tables
 * (stacks/symbols.h) run on every file a process maps, once a file: the
 * stacks floor reads a runtime's facts by slot, never by name. HotSpot is
 * recognised by its process's libjvm.so at attach (hotspot/jvmnames.h).
 *
 * The runtimes whose frames are found in a sample's stack copy (V8) are
 * asked of each user frame, and name those frames at export, through
 * fp_runtimes_frame() and fp_runtimes_name().
 */

#include "runtimes.h"

#include <string.h>

#include "perl.h"
#include "php.h"
#include "python.h"
#include "ruby.h"
#include "symbols.h"
#include "v8.h"

const struct fp_sym_inspector *const fp_sym_inspectors[] = {&fp_py_inspector,   &fp_v8_inspector,
                                                            &fp_php_inspector,  &fp_ruby_inspector,
                                                            &fp_perl_inspector, NULL};
_Static_assert(sizeof(fp_sym_inspectors) / sizeof(fp_sym_inspectors[0]) <= FP_SYM_INSPECTORS + 1,
               "more runtimes' inspectors than FP_SYM_INSPECTORS");

int fp_runtimes_frames(struct fp_maps *m, const struct fp_rt_frame_at *at, size_t n,
                       struct fp_frame *ret, bool *found)
{
        return fp_v8_frames(m, at, n, ret, found);
}

void fp_runtimes_stats(struct fp_maps *m, struct fp_rt_stats *ret)
{
        fp_v8_stats(m, ret);
}

void fp_runtimes_stats_add(struct fp_rt_stats *a, const struct fp_rt_stats *b)
{
        if (!a->runtime[0])
                memcpy(a->runtime, b->runtime, sizeof(a->runtime));
        if (!a->refused[0])
                memcpy(a->refused, b->refused, sizeof(a->refused));
        a->frames += b->frames;
        a->typed += b->typed;
        a->no_function += b->no_function;
        a->unreadable += b->unreadable;
        a->functions += b->functions;
        a->functions_full += b->functions_full;
}

bool fp_runtimes_name(struct fp_maps *m, const struct fp_frame *f, struct fp_rt_name *ret)
{
        return fp_v8_name(m, f, ret);
}
