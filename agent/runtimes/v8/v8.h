/* SPDX-License-Identifier: MIT */
/*
 * V8 (Node.js), read from outside the process with no flag: its binary
 * recognised by the v8dbg_* symbols it exports (the postmortem metadata
 * V8's build writes: object layouts, frame slots and type numbers of that
 * very build), its JavaScript frames found in each sample's stack copy and
 * named through the process's memory (v8frames.c).
 *
 * A JavaScript frame. V8's code (the interpreter's handlers, Sparkplug,
 * Maglev and TurboFan code, the builtins) keeps frame pointers. A frame
 * whose slot at fp + off_fp_context is a Smi is a typed frame (a stub, an
 * entry or exit frame: the Smi is its type's marker); any other holds the
 * context, and its slot at fp + off_fp_function the JSFunction that runs.
 * Only frames whose code is V8's are looked at: anonymous executable
 * memory (the code space) and the builtins in the binary itself.
 *
 * Naming. JSFunction -> SharedFunctionInfo (its map's instance type
 * checked at each step) -> the name (a String, or the ScopeInfo holding
 * it), the Script -> its name (the file), the function's start position
 * -> its line (counted in the script's source once). A function is read
 * once, at its first sample, while the process lives, and kept by its
 * SharedFunctionInfo's address and a stamp of what it points to, so that
 * another function allocated where a collected one was is read anew.
 */
#pragma once

#include "aggregate.h"
#include "rtframe.h"

#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The layout of one V8 build, as its v8dbg_* symbols say (-1: not exported). */
struct fp_v8_layout {
        int32_t tagged_size, smi_shift, smi_tag_mask, heap_object_tag, heap_object_tag_mask;
        int32_t off_fp_function, off_fp_context, off_fp_bytecode_offset;
        int32_t heap_object_map, map_instance_type;
        int32_t js_function_shared;
        int32_t sfi_name_or_scope_info, sfi_script_or_debug_info, sfi_function_data;
        int32_t script_name, script_source;
        int32_t string_length, seq_one_byte_chars, seq_two_byte_chars;
        int32_t cons_first, cons_second, thin_actual, sliced_parent, sliced_offset;
        int32_t uncompiled_start_position;
        int32_t scopeinfo_first_vars, scopeinfo_ncontextlocals;
        /* String instance types: masks and tags. */
        int32_t is_not_string_mask, string_tag, representation_mask, encoding_mask;
        int32_t seq_tag, cons_tag, sliced_tag, thin_tag, one_byte_tag, two_byte_tag;
        int32_t first_nonstring_type;
        /* Instance types. */
        int32_t type_js_function, type_sfi, type_script, type_scope_info;
        int32_t type_uncompiled_first, type_uncompiled_last; /* UncompiledData*'s range */
};

/* What the inspector reads in a file (symbols.h: once a file). */
struct fp_v8_facts {
        bool v8;                 /* the file exports v8dbg_* symbols */
        char missing[96];        /* the first field the walk needs that it lacks, "" none */
        uint64_t builtins_start; /* link-time range of its Builtins_* code, 0 none */
        uint64_t builtins_end;
        int version[4]; /* V8's major, minor, build, patch; 0 unknown */
        struct fp_v8_layout layout;
};

void fp_v8_inspect(Elf *elf, struct fp_v8_facts *ret);
extern const struct fp_sym_inspector fp_v8_inspector;

/* Reads the facts of the file at path: 0, or -errno (no file, not ELF). */
int fp_v8_inspect_file(const char *path, struct fp_v8_facts *ret);

/*
 * The JavaScript frames among a sample's n frames at[] (leaf first) of
 * the process m is of (found to run V8 at its first samples; looked for
 * again as its mappings change and its files' tables are read): for each,
 * ret[i] its FP_FRAME_RUNTIME frame (addr: its function's entry) and
 * found[i] set; returns how many. The others stay native: not V8's code,
 * a typed frame, or a function that did not read (counted). The objects
 * of all its frames are read in two reads of the process (FP_V8_MAX_FRAMES
 * frames at most).
 */
#define FP_V8_MAX_FRAMES 512
struct fp_maps;
int fp_v8_frames(struct fp_maps *m, const struct fp_rt_frame_at *at, size_t n, struct fp_frame *ret,
                 bool *found);
/* The names of frame f (function: "(anonymous)" for a function without one); false: not V8's. */
bool fp_v8_name(struct fp_maps *m, const struct fp_frame *f, struct fp_rt_name *ret);
/* Frees a process's V8 state (the inspector's free_state). */
void fp_v8_state_free(void *state);

/* What became of the process's JavaScript frames (runtime: "V8 M.m.b.p" once recognised). */
void fp_v8_stats(struct fp_maps *m, struct fp_rt_stats *ret);
#define FP_V8_FUNCTIONS 32768 /* functions kept per process at most */
