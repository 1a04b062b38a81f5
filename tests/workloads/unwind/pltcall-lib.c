// SPDX-License-Identifier: MIT
/*
 * The library of pltcall (see pltcall.c). Built -fPIC without
 * -Bsymbolic, as distributions build libraries such as libsqlite3: a
 * call from one exported function to another goes through the library's
 * own PLT, because another object may interpose it.
 */
#include "pltcall.h"

uint64_t pltcall_inner(uint64_t x)
{
        return x * 6364136223846793005ULL + 1442695040888963407ULL;
}

uint64_t pltcall_outer(uint64_t x)
{
        for (int i = 0; i < 64; i++)
                x = pltcall_inner(x);
        return x;
}
