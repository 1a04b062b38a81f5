// SPDX-License-Identifier: MIT
/* The library side of pltcall (pltcall-lib.c): exported, so every call goes through a PLT. */
#pragma once
#include <stdint.h>

/* One step of a generator: a handful of instructions, so the PLT stub is a large share. */
uint64_t pltcall_inner(uint64_t x);
/* 64 steps, each through the library's own PLT (an exported function may be interposed). */
uint64_t pltcall_outer(uint64_t x);
