/* SPDX-License-Identifier: MIT */
/*
 * Symbol names as people write them: C++ (Itanium ABI, "_Z...") and Rust
 * (legacy "_ZN...17h<hash>E" and v0 "_R...") demangled by libiberty's
 * demangler, the one binutils, gdb and perf use (docs/design.md says why).
 *
 * Bounded against hostile names: a name longer than FP_DEMANGLE_MAX_IN
 * bytes is not tried, libiberty's own recursion limit stays on, and an
 * answer longer than FP_DEMANGLE_MAX_OUT bytes is dropped; a name that
 * cannot be demangled stays as it is. A suffix the linker or compiler adds
 * after the symbol ("@plt" here, ".cold" and ".isra.0" clones, which
 * libiberty names itself) is kept.
 *
 * Answers are cached process-wide by name (a symbol is demangled once
 * however many processes map its binary). The cache only empties in
 * fp_demangle_trim(), when it holds more than FP_DEMANGLE_CACHE names or
 * FP_DEMANGLE_CACHE_BYTES bytes: the exporter calls it between buckets,
 * when it holds no answer. Thread-safe.
 */
#pragma once

#include <stddef.h>

#define FP_DEMANGLE_MAX_IN      4096
#define FP_DEMANGLE_MAX_OUT     16384
#define FP_DEMANGLE_CACHE       200000
#define FP_DEMANGLE_CACHE_BYTES (32u << 20)

/*
 * The demangled name of name, or NULL when it is not a mangled name or
 * cannot be demangled within the bounds (or out of memory). The string is
 * valid until the next fp_demangle_trim() or fp_demangle_reset().
 */
const char *fp_demangle(const char *name);

/*
 * The same without the cache, into buf (size bytes; an answer that does
 * not fit is none): 1 when demangled, 0 when not.
 */
int fp_demangle_into(const char *name, char *buf, size_t size);

/* Empties the cache when it is over its bounds; returns whether it did. */
int fp_demangle_trim(void);
/* Empties the cache (tests; an agent's exit). */
void fp_demangle_reset(void);
/* Names cached now (demangled or found not to be). */
size_t fp_demangle_cached(void);
