/* SPDX-License-Identifier: MIT */
/*
 * pprof profiles: build, merge, encode, decode and print.
 *
 * struct fp_pprof is an in-memory profile.proto that interns everything it
 * holds: strings, mappings, functions and locations are deduplicated, and
 * samples with the same locations and labels are merged by summing their
 * values. The agent builds one from its aggregated stacks, the collector
 * decodes uploads into one and merges them, and the text printers (top,
 * folded) work on one, so every path from samples to people goes through
 * this module.
 *
 * Ids handed out (mapping, function, location) are 1-based, as in pprof;
 * 0 means "none". Every function that can fail returns 0 or a count on
 * success and -errno on failure (-ENOMEM, -EINVAL, -EBADMSG for malformed
 * input, -EFBIG for input over a size limit).
 */
#pragma once

#include "escape.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fp_pprof;

/* A sample label: a string label when str != NULL, else a numeric one. */
struct fp_pprof_label {
        const char *key;
        const char *str;
        int64_t num;
        const char *num_unit; /* may be NULL */
};

/* Read-only view of one sample, as handed out by fp_pprof_sample_get(). */
struct fp_pprof_sample_view {
        const uint64_t *location_ids; /* leaf first, as in profile.proto */
        size_t n_locations;
        const int64_t *values; /* n_sample_types entries */
        size_t n_labels;
};

/* Read-only view of one location's first line (its innermost function). */
struct fp_pprof_location_view {
        uint64_t mapping_id;
        uint64_t address;
        const char *function_name; /* "" when the location has no line */
        const char *mapping_file;  /* "" when no mapping */
        const char *build_id;      /* "" when unknown */
        uint64_t mapping_start, mapping_limit, mapping_offset; /* 0 when no mapping */
        bool mapping_has_vaddr; /* the ELF address of mapping_start is known: */
        uint64_t mapping_vaddr; /* it (0 when not known) */
        size_t n_lines;         /* its lines: inlined functions first, the caller last */
};

/* Line j of a location (j < n_lines): its function's name and file ("" none) and line. */
struct fp_pprof_line_view {
        const char *function_name;
        const char *system_name; /* the function's name as its code carries it */
        const char *filename;
        int64_t line;
};

struct fp_pprof *fp_pprof_new(void);
void fp_pprof_free(struct fp_pprof *p);

/* Appends a sample type ("samples"/"count", "cpu"/"nanoseconds"); returns its index. */
int fp_pprof_add_sample_type(struct fp_pprof *p, const char *type, const char *unit);
size_t fp_pprof_n_sample_types(const struct fp_pprof *p);
/* The index of the sample type (type, unit), or -ENOENT. */
int fp_pprof_find_sample_type(const struct fp_pprof *p, const char *type, const char *unit);
/* Type and unit of sample type i; NULL when out of range. */
const char *fp_pprof_sample_type(const struct fp_pprof *p, size_t i, const char **ret_unit);
int fp_pprof_set_period(struct fp_pprof *p, const char *type, const char *unit, int64_t period);
/* The period (0 when unset) and its type and unit ("" when unset). */
int64_t fp_pprof_period(const struct fp_pprof *p, const char **ret_type, const char **ret_unit);
void fp_pprof_set_time(struct fp_pprof *p, int64_t time_nanos, int64_t duration_nanos);
void fp_pprof_get_time(const struct fp_pprof *p, int64_t *ret_time_nanos,
                       int64_t *ret_duration_nanos);
int fp_pprof_set_default_sample_type(struct fp_pprof *p, const char *type);
/* The default sample type's name, "" when unset. */
const char *fp_pprof_default_sample_type(const struct fp_pprof *p);
int fp_pprof_add_comment(struct fp_pprof *p, const char *text);
size_t fp_pprof_n_comments(const struct fp_pprof *p);
const char *fp_pprof_comment(const struct fp_pprof *p, size_t i);

/* Interned; identical arguments return the same id. Strings may be NULL (= ""). */
int fp_pprof_mapping(struct fp_pprof *p, uint64_t memory_start, uint64_t memory_limit,
                     uint64_t file_offset, const char *filename, const char *build_id,
                     uint64_t *ret_id);
/*
 * Says which ELF virtual address mapping id's memory_start holds (what a
 * stripped build's debug file names, with no executable to read its
 * program headers from): written as fleetprof's own field of Mapping.
 */
int fp_pprof_mapping_set_vaddr(struct fp_pprof *p, uint64_t id, uint64_t vaddr);
int fp_pprof_function(struct fp_pprof *p, const char *name, const char *filename, uint64_t *ret_id);
/*
 * The same with the name the code itself carries (a mangled C++ or Rust
 * symbol, a Python function's own name beside its qualified one; NULL or
 * "": the name) and the line its definition starts at (0: unknown).
 */
int fp_pprof_function_full(struct fp_pprof *p, const char *name, const char *system_name,
                           const char *filename, int64_t start_line, uint64_t *ret_id);
/*
 * Names the main binary: pprof readers take the first mapping of a profile
 * for it ("File:" in go tool pprof), so the encoder writes the first
 * mapping whose file name is filename before the others. Returns -ENOENT
 * (and changes nothing) when no mapping has that file name.
 */
int fp_pprof_set_main_binary(struct fp_pprof *p, const char *filename);
/* A location with one line (function_id != 0) or none (function_id == 0). */
int fp_pprof_location(struct fp_pprof *p, uint64_t mapping_id, uint64_t address,
                      uint64_t function_id, uint64_t *ret_id);
/* The same with the line of that function it was at (0: unknown). */
int fp_pprof_location_at(struct fp_pprof *p, uint64_t mapping_id, uint64_t address,
                         uint64_t function_id, int64_t line_no, uint64_t *ret_id);

/*
 * Adds values (fp_pprof_n_sample_types() of them) to the sample with these
 * locations (leaf first) and labels, creating it when new. Label order does
 * not matter for the merge.
 */
int fp_pprof_add_sample(struct fp_pprof *p, const uint64_t *location_ids, size_t n_locations,
                        const int64_t *values, const struct fp_pprof_label *labels,
                        size_t n_labels);

size_t fp_pprof_n_samples(const struct fp_pprof *p);
/* Locations held: their ids are 1 to this. */
size_t fp_pprof_n_locations(const struct fp_pprof *p);
int fp_pprof_sample_get(const struct fp_pprof *p, size_t i, struct fp_pprof_sample_view *ret);
/* Label j of sample i; pointers stay valid until the profile changes. */
int fp_pprof_sample_label(const struct fp_pprof *p, size_t i, size_t j, struct fp_pprof_label *ret);
int fp_pprof_location_get(const struct fp_pprof *p, uint64_t location_id,
                          struct fp_pprof_location_view *ret);
/* -ENOENT when the location or the line does not exist. */
int fp_pprof_location_line(const struct fp_pprof *p, uint64_t location_id, size_t j,
                           struct fp_pprof_line_view *ret);
/* Sum of sample type i over all samples. */
int64_t fp_pprof_total(const struct fp_pprof *p, size_t i);

/*
 * Adds every sample of src to dst, re-interning its strings, mappings,
 * functions and locations. Sample types must match (same types and units
 * in the same order; an empty dst takes src's) or -EINVAL. Comments are
 * appended, the time range widens to cover both. dst == src is -EINVAL;
 * after -ENOMEM dst may hold part of src.
 */
int fp_pprof_merge(struct fp_pprof *dst, const struct fp_pprof *src);

/*
 * Like fp_pprof_merge(), but sample types are matched by type and unit,
 * not by position: a type of src that dst lacks is appended to dst first
 * (dst's samples get 0 for it), and a type of dst that src lacks gets 0
 * from src's samples. With only_type set, just src's sample type of that
 * name is taken, and src's comments, period and default type are not:
 * how the values of a counter join the profile of the event that sampled
 * them. -EINVAL when only_type names no type of src.
 */
int fp_pprof_merge_typed(struct fp_pprof *dst, const struct fp_pprof *src, const char *only_type);

/*
 * Like fp_pprof_merge(), but only the samples keep(src, i, arg) takes, and
 * only the strings, mappings, functions and locations they use: how one
 * profile is cut into several (a host tier's round into one per service).
 */
typedef bool (*fp_pprof_keep_fn)(const struct fp_pprof *src, size_t i, void *arg);
int fp_pprof_merge_where(struct fp_pprof *dst, const struct fp_pprof *src, fp_pprof_keep_fn keep,
                         void *arg);

/*
 * Like fp_pprof_merge(), but a location of src may be given a new name:
 * rename(src, location_id, arg, &name, &system_name) returns 1 to replace
 * the location's lines with one line of a function of that name (and that
 * system name, NULL or "": none; both strings need only live until it
 * returns to the merge), 0 to keep them. How the collector names frames
 * the agent could not (an address in a stripped file) once it has the
 * file's symbols. Samples whose stacks become equal merge.
 */
typedef int (*fp_pprof_rename_fn)(const struct fp_pprof *src, uint64_t location_id, void *arg,
                                  const char **ret_name, const char **ret_system_name);
int fp_pprof_merge_renamed(struct fp_pprof *dst, const struct fp_pprof *src,
                           fp_pprof_rename_fn rename, void *arg);

/* An OTLP attribute: a string when str != NULL, else an integer. */
struct fp_otlp_attr {
        const char *key;
        const char *str;
        int64_t num;
};

#define FP_OTLP_MAX_ATTRS 40 /* a resource's profile attributes and drops, each */

/*
 * A resource of an OTLP request: its attributes, the samples it holds
 * (keep NULL: all of them), attributes of each of its profiles and
 * attributes of its first profile only (the drops: counted once).
 */
struct fp_otlp_resource {
        const struct fp_otlp_attr *attrs;
        size_t n_attrs;
        fp_pprof_keep_fn keep;
        void *arg;
        const struct fp_otlp_attr *profile_attrs;
        size_t n_profile_attrs;
        const struct fp_otlp_attr *drop_attrs;
        size_t n_drop_attrs;
};

/*
 * p as an OTLP ExportProfilesServiceRequest (opentelemetry-proto v1.9.0,
 * protobuf): one ResourceProfiles per resource, each with one scope
 * (scope_name, scope_version) and a profile per sample type of p, all
 * with the same samples in the same order. Sample labels become sample
 * attributes (thread -> thread.id, thread_name -> thread.name, pid ->
 * process.pid, the rest by their names) but those named in skip_labels
 * (NULL-terminated, may be NULL); build IDs become the mappings'
 * process.executable.build_id.gnu. p gains strings. *ret is malloc'd.
 */
int fp_pprof_to_otlp(struct fp_pprof *p, const struct fp_otlp_resource *res, size_t n_res,
                     const char *const *skip_labels, const char *scope_name,
                     const char *scope_version, uint8_t **ret, size_t *ret_len);

/* Serialises to profile.proto, gzip-compressed when gzip != 0. *ret_buf is malloc'd. */
int fp_pprof_encode(const struct fp_pprof *p, int gzip, uint8_t **ret_buf, size_t *ret_len);

/*
 * Parses a profile.proto, gzip-compressed or not (detected by magic).
 * Validates everything an outside sender could get wrong: decompressed
 * size over max_size (-EFBIG), not protobuf (-EBADMSG), string indices
 * outside the table, ids that refer to nothing, values count not matching
 * sample types, negative counts, ... On failure a one-line description
 * of the first problem found is written into errbuf (errbuf_len bytes,
 * may be NULL/0). max_size == 0 means FP_PPROF_DEFAULT_MAX_SIZE.
 */
#define FP_PPROF_DEFAULT_MAX_SIZE ((size_t)64 << 20) /* what max_size == 0 means */
int fp_pprof_decode(const uint8_t *buf, size_t len, size_t max_size, struct fp_pprof **ret,
                    char *errbuf, size_t errbuf_len);
/* gzip (RFC 1952, no name or time: the same bytes for the same input) into a malloc'd buffer. */
int fp_pprof_gzip(const uint8_t *in, size_t len, uint8_t **ret, size_t *ret_len);
/*
 * Inflates gzip data into a malloc'd buffer of at most max_size bytes (0:
 * the default), the way fp_pprof_decode() does: -EFBIG past it, -EBADMSG
 * for data that is not gzip or is truncated, with one line in errbuf.
 */
int fp_pprof_gunzip(const uint8_t *buf, size_t len, size_t max_size, uint8_t **ret, size_t *ret_len,
                    char *errbuf, size_t errbuf_len);

/*
 * Text output for people. top: a flat/cumulative table of the n hottest
 * functions by sample type index value_index (n == 0: all), with shares in
 * percent, plus per-thread shares when samples carry a "thread_name"
 * label. folded: one "root;...;leaf value" line per distinct stack.
 */
int fp_pprof_write_top(const struct fp_pprof *p, size_t value_index, size_t n, FILE *out);

/*
 * Flame graphs (pprof_flame.c): profiles as one call tree, root first. A
 * node is a frame name under its parent; each has two value sets, 0 (the
 * profile) and 1 (a baseline, for a diff), with total = self + the
 * children's totals. Node 0, "all", holds the whole profile.
 */
struct fp_flame;
int fp_flame_new(struct fp_flame **ret);
void fp_flame_free(struct fp_flame *f);
/* Adds p's value vi (of positive samples) into set 0 or 1. 0 or -errno. */
int fp_flame_add(struct fp_flame *f, const struct fp_pprof *p, size_t vi, unsigned set);
size_t fp_flame_n_nodes(const struct fp_flame *f);
int64_t fp_flame_total(const struct fp_flame *f, unsigned set);
/*
 * Keeps at most about max_nodes nodes, the heaviest: a parent's children
 * that are cut become one "(other)" child of it, so totals still add up
 * and the root's stays the profile's. 0 or -ENOMEM.
 */
int fp_flame_prune(struct fp_flame *f, size_t max_nodes);
/*
 * The tree as JSON: {"name","self","total"[,"base_self","base_total"],
 * "children":[...]}, children heaviest first; no recursion, any depth.
 */
int fp_flame_write_json(const struct fp_flame *f, bool diff, fp_write_fn w, void *ctx);
/*
 * The tree as Pyroscope's flame graph draws it (its querier API's levels):
 * every node once, level by level from the root (level 0), left to right
 * within a level. A node's x is where it starts from the graph's left
 * edge, in each value set: its own self comes first, then its children,
 * heaviest first, so a child lies within its parent. name indexes
 * fp_flame_name(). fn's negative return stops the walk and is returned;
 * else 0, or -ENOMEM.
 */
struct fp_flame_bar {
        size_t level;
        uint32_t name;
        int64_t x[2], total[2], self[2];
};
typedef int (*fp_flame_bar_fn)(void *ctx, const struct fp_flame_bar *b);
int fp_flame_levels(const struct fp_flame *f, fp_flame_bar_fn fn, void *ctx);
/* The names the bars index ("all" is the root's); out of range: "". */
size_t fp_flame_n_names(const struct fp_flame *f);
const char *fp_flame_name(const struct fp_flame *f, size_t i);
int fp_pprof_write_folded(const struct fp_pprof *p, size_t value_index, FILE *out);
