/* SPDX-License-Identifier: MIT */
/*
 * Names of JIT-compiled code from a perf map: the file /tmp/perf-PID.map
 * that the JVM (with -XX:+DumpPerfMapAtExit or perf-map-agent), Node
 * (--perf-basic-prof), .NET (DOTNET_PerfMapEnabled), LuaJIT and others
 * write, one line per compiled function:
 *
 *     START SIZE NAME          (START and SIZE in hex, NAME to the line end)
 *
 * The file is the target's, so it is read as hostile input: through
 * /proc/PID/root (the target's own /tmp, in its mount namespace, under the
 * PID it knows itself by), opened without following a final symlink and
 * without blocking, a regular file only, at most FP_PERFMAP_MAX_BYTES and
 * FP_PERFMAP_MAX_ENTRIES, names cut at FP_PERFMAP_MAX_NAME. Runtimes
 * append as they compile, so a lookup that misses re-reads the file when
 * its size or mtime changed, at most once a second.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_PERFMAP_MAX_BYTES   (64u << 20)
#define FP_PERFMAP_MAX_ENTRIES (1u << 20)
#define FP_PERFMAP_MAX_NAME    256

struct fp_perfmap;

/* A perf map for process pid, read on first lookup. NULL on -ENOMEM. */
struct fp_perfmap *fp_perfmap_new(pid_t pid);
void fp_perfmap_free(struct fp_perfmap *m);

/*
 * Parses a perf map from a file at path (the loader's rules above) into m,
 * replacing what it held. 0, or -errno (-EINVAL: not a regular file; a
 * malformed line is skipped, not an error).
 */
int fp_perfmap_load(struct fp_perfmap *m, const char *path);

/* The name of the code at addr, or NULL. May re-read the file (see above). */
const char *fp_perfmap_lookup(struct fp_perfmap *m, uint64_t addr);
