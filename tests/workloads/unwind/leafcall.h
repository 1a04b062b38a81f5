// SPDX-License-Identifier: MIT
/* The callers and the shared leaf of leafcall (leafcall-lib.c). */
#pragma once
#include <stdint.h>

/* One call of each caller; adds each caller's CPU time (ns) to spent[0..3]. */
void leafcall_round(uint64_t spent[4]);
