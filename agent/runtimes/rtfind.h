/* SPDX-License-Identifier: MIT */
/*
 * Finding an interpreter recognised in its files in a live process
 * (rtfind.c), for the runtimes whose inspectors read each file once
 * (symbols.h) and whose judge then says, under the name the file is
 * mapped by, whether it is that runtime and one it reads.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct fp_maps;
struct fp_sym_inspector;

/*
 * A runtime's judge of one file's facts (its inspector's) mapped as path:
 * 1 with *bin filled, 0 when it is not the runtime, < 0 with one line in
 * why when it is one that cannot be read.
 */
typedef int (*fp_rt_judge_fn)(const void *facts, const char *path, void *bin, char *why,
                              size_t why_len);

/*
 * Whether process m runs the runtime of inspector in, among its live
 * mappings whose files were read: 1 with *ret_bin (bin_size bytes, kept
 * in the process's state until the next call) and its load bias; -1 with
 * *ret_why when one was refused (logged once per file, "NAME: why; its
 * samples stay native-only"); 0 neither.
 */
int fp_rt_find(struct fp_maps *m, const struct fp_sym_inspector *in, fp_rt_judge_fn judge,
               size_t bin_size, const void **ret_bin, uint64_t *ret_bias, const char **ret_why);
