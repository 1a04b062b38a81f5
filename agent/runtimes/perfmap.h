/* SPDX-License-Identifier: MIT */
/*
 * Names of JIT-compiled code from a perf map: the file /tmp/perf-PID.map
 * that the JVM (jcmd PID Compiler.perfmap, -XX:+DumpPerfMapAtExit), Node
 * (--perf-basic-prof), .NET (DOTNET_PerfMapEnabled), LuaJIT and others
 * write, one line per compiled function:
 *
 *     START SIZE NAME          (START and SIZE in hex, NAME to the line end)
 *
 * The file is the target's, so it is read as hostile input: through
 * /proc/PID/root (the target's own /tmp, in its mount namespace, under the
 * PID it knows itself by), opened without following a final symlink and
 * without blocking, a regular file only, at most FP_PERFMAP_MAX_BYTES and
 * FP_PERFMAP_MAX_ENTRIES, names cut at FP_PERFMAP_MAX_NAME.
 *
 * Runtimes append as they compile (a line may be half written: only whole
 * lines count) or write the file anew (jcmd). A lookup that misses
 * re-reads it when its size, mtime or inode changed, at most every
 * FP_PERFMAP_RECHECK_NS per process: an appended file from where the last
 * read stopped, a shorter or replaced one whole. Where two lines cover an
 * address (code freed and compiled anew), the later line wins.
 *
 * Names must be read while the process lives, since /proc/PID/root goes
 * with it: samplers look their JIT frames up as they arrive (the stack
 * walk's resolve step), so a map written during the run is read during
 * the run. After the process has exited, a map it left in /tmp is still
 * read when the process shared the agent's mount namespace, and only if
 * the file belongs to the process's user (or root), as /tmp's sticky bit
 * keeps it: no other user can plant names for a dead process. A map older
 * than its process is none of its (an earlier process of the same PID left
 * it) and is not read.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FP_PERFMAP_MAX_BYTES   (64u << 20)
#define FP_PERFMAP_MAX_ENTRIES (1u << 20)
#define FP_PERFMAP_MAX_NAME    256
#define FP_PERFMAP_RECHECK_NS  100000000ULL /* 100 ms between looks at a map after misses */

struct fp_perfmap;

/*
 * A perf map for process pid, read on first lookup; what is needed to find
 * the map after the process exits is read now, while it lives. NULL on
 * -ENOMEM.
 */
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
/*
 * The next miss looks at the file at once, whenever the last look was: the
 * runtime was just asked to write it anew (a JVM's answer, jvmnames.h).
 */
void fp_perfmap_recheck(struct fp_perfmap *m);

/* How often the file was read (whole or from where the last read stopped). */
uint64_t fp_perfmap_reads(const struct fp_perfmap *m);
