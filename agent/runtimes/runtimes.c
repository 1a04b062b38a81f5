/* SPDX-License-Identifier: MIT */
/*
 * The language runtimes the agent names frames of, each in a folder of its
 * own here (python/, hotspot/), above the stacks floor and below sampling.
 *
 * The runtimes recognised by what their files hold (CPython by _PyRuntime)
 * have an inspector each in the table below, which the symbol tables
 * (stacks/symbols.h) run on every file a process maps, once a file: the
 * stacks floor reads a runtime's facts by slot, never by name. HotSpot is
 * recognised by its process's libjvm.so at attach (hotspot/jvmnames.h).
 */

#include "python.h"
#include "symbols.h"

const struct fp_sym_inspector *const fp_sym_inspectors[] = {&fp_py_inspector, NULL};
_Static_assert(sizeof(fp_sym_inspectors) / sizeof(fp_sym_inspectors[0]) <= FP_SYM_INSPECTORS + 1,
               "more runtimes' inspectors than FP_SYM_INSPECTORS");
