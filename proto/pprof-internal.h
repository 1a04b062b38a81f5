/* SPDX-License-Identifier: MIT */
/*
 * The inside of struct fp_pprof, shared by the four files of the pprof
 * module: pprof.c (the interned model, building, accessors),
 * pprof_merge.c (merging), pprof_wire.c (profile.proto encoding and
 * decoding, gzip) and pprof_text.c (top and folded output). Nothing
 * outside proto/ but the module's unit test includes this header.
 *
 * Invariants, which every function that changes a profile keeps:
 *   - strs[0] is "", and every string is stored once (str_tab finds it);
 *     string indices are uint32_t, FP_PP_NOSTR marks "no string" (the str
 *     of a numeric label). Strings are malloc'd one by one and never move
 *     or go away before fp_pprof_free(), so pointers to them stay valid.
 *   - mappings[i], functions[i], locations[i] have id i + 1; each is
 *     stored once (its table finds it by content), and every id a location
 *     or line refers to exists.
 *   - samples[i] owns n_locs entries of sample_locs from loc_off, n_labels
 *     entries of sample_labels from label_off (sorted by fp_pp_label_cmp,
 *     so label order does not matter), and values[i * n_types ...]. No two
 *     samples have the same locations and labels. Values are >= 0, sums
 *     saturate at INT64_MAX, totals[t] is the sum over samples of type t.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof.h"

#define FP_PP_NOSTR UINT32_MAX
/* Most entries (strings, samples, ...) one profile may hold: ids fit in 32 bits. */
#define FP_PP_MAX_ENTRIES (UINT32_MAX - 2u)

/* Mapping flags, as in profile.proto's Mapping.has_*. */
#define FP_PP_HAS_FUNCTIONS     0x1u
#define FP_PP_HAS_FILENAMES     0x2u
#define FP_PP_HAS_LINE_NUMBERS  0x4u
#define FP_PP_HAS_INLINE_FRAMES 0x8u

/*
 * An open-addressing hash index over an array kept elsewhere: a slot holds
 * an entry's hash and its array index + 1 (0: empty). Power-of-two size,
 * at most 3/4 full, linear probing. Callers compare contents themselves.
 */
struct fp_pp_slot {
        uint32_t hash;
        uint32_t idx1;
};

struct fp_pp_itab {
        struct fp_pp_slot *slots;
        size_t cap;
        size_t n;
};

typedef bool (*fp_pp_eq_fn)(const void *ctx, uint32_t idx);

struct fp_pp_str {
        char *s;
        size_t len;
        uint32_t hash;
};

struct fp_pp_vtype {
        uint32_t type;
        uint32_t unit;
};

struct fp_pp_mapping {
        uint64_t start;
        uint64_t limit;
        uint64_t offset;
        uint64_t vaddr1; /* the ELF address start holds, plus one; 0: unknown (not in the key) */
        uint32_t filename;
        uint32_t build_id;
        uint32_t hash;
        uint32_t flags;
};

struct fp_pp_function {
        uint32_t name;
        uint32_t system_name;
        uint32_t filename;
        uint32_t hash;
        int64_t start_line;
};

struct fp_pp_line {
        uint64_t function_id; /* 0: no function */
        int64_t line;
};

struct fp_pp_location {
        uint64_t mapping_id;
        uint64_t address;
        size_t line_off; /* into lines[] */
        uint32_t n_lines;
        uint32_t hash;
        bool is_folded;
};

struct fp_pp_label {
        uint32_t key;
        uint32_t str;  /* FP_PP_NOSTR: a numeric label */
        uint32_t unit; /* 0: none */
        int64_t num;
};

struct fp_pp_sample {
        size_t loc_off;
        size_t label_off;
        uint32_t n_locs;
        uint32_t n_labels;
        uint32_t hash;
};

struct fp_pprof {
        uint64_t seed;

        struct fp_pp_str *strs;
        size_t n_strs, cap_strs;
        struct fp_pp_itab str_tab;

        struct fp_pp_vtype *types;
        int64_t *totals;
        size_t n_types, cap_types;

        struct fp_pp_vtype period_type;
        int64_t period;
        int64_t time_nanos;
        int64_t duration_nanos;
        uint32_t default_type;
        uint32_t drop_frames;
        uint32_t keep_frames;

        uint32_t *comments;
        size_t n_comments, cap_comments;

        struct fp_pp_mapping *mappings;
        size_t n_mappings, cap_mappings;
        /* Id of the main binary's mapping, which the encoder puts first; 0: mappings[0]. */
        uint64_t main_mapping;
        struct fp_pp_itab mapping_tab;

        struct fp_pp_function *functions;
        size_t n_functions, cap_functions;
        struct fp_pp_itab function_tab;

        struct fp_pp_location *locations;
        size_t n_locations, cap_locations;
        struct fp_pp_line *lines;
        size_t n_lines, cap_lines;
        struct fp_pp_itab location_tab;

        struct fp_pp_sample *samples;
        size_t n_samples, cap_samples;
        uint64_t *sample_locs;
        size_t n_sample_locs, cap_sample_locs;
        struct fp_pp_label *sample_labels;
        size_t n_sample_labels, cap_sample_labels;
        int64_t *values; /* n_samples * n_types, cap_values entries */
        size_t cap_values;
        struct fp_pp_itab sample_tab;

        /* Reused by add_sample and merge so the hot path does not malloc. */
        struct fp_pp_label *scratch_labels;
        size_t cap_scratch_labels;
        uint64_t *scratch_locs;
        size_t cap_scratch_locs;
        struct fp_pp_line *scratch_lines;
        size_t cap_scratch_lines;
};

/*
 * Every allocation of the module goes through these, so that the unit test
 * can make the n-th one fail (fp_pp_alloc_countdown = n; -1: none, the
 * default) and check that each error path returns -ENOMEM cleanly. Not
 * thread-safe, and not for anything but tests. Sizes of 0 allocate 1.
 */
extern long fp_pp_alloc_countdown;
void *fp_pp_malloc(size_t size);
void *fp_pp_calloc(size_t n, size_t size);
void *fp_pp_realloc(void *ptr, size_t size);

/* Grows *ptr (an array of elem-sized entries, *cap of them) to hold need. */
void *fp_pp_grow(void *ptr, size_t *cap, size_t need, size_t elem);
#define FP_PP_GROW(arr, cap, need)                                                                 \
        ({                                                                                         \
                int _r = 0;                                                                        \
                if ((need) > (cap)) {                                                              \
                        void *_n = fp_pp_grow((arr), &(cap), (need), sizeof(*(arr)));              \
                        if (_n)                                                                    \
                                (arr) = _n;                                                        \
                        else                                                                       \
                                _r = -ENOMEM;                                                      \
                }                                                                                  \
                _r;                                                                                \
        })

/* Hashing: seeded per profile, so outside input cannot aim at collisions. */
static inline uint64_t fp_pp_mix(uint64_t h)
{
        h ^= h >> 30;
        h *= UINT64_C(0xbf58476d1ce4e5b9);
        h ^= h >> 27;
        h *= UINT64_C(0x94d049bb133111eb);
        h ^= h >> 31;
        return h;
}

static inline uint64_t fp_pp_hash_step(uint64_t h, uint64_t word)
{
        return fp_pp_mix(h ^ word) + UINT64_C(0x9e3779b97f4a7c15);
}

static inline uint32_t fp_pp_hash_final(uint64_t h)
{
        return (uint32_t)(h ^ (h >> 32));
}

static inline int64_t fp_pp_add_sat(int64_t a, int64_t b)
{
        int64_t r;

        if (__builtin_add_overflow(a, b, &r))
                return b > 0 ? INT64_MAX : INT64_MIN;
        return r;
}

uint64_t fp_pp_hash_bytes(uint64_t h, const void *data, size_t len);

int fp_pp_itab_reserve(struct fp_pp_itab *t);
size_t fp_pp_itab_find(const struct fp_pp_itab *t, uint32_t hash, fp_pp_eq_fn eq, const void *ctx,
                       bool *ret_found);
void fp_pp_itab_set(struct fp_pp_itab *t, size_t slot, uint32_t hash, uint32_t idx);
void fp_pp_itab_done(struct fp_pp_itab *t);

/*
 * The name of frame `line` of location id (0-based, innermost first):
 * its function's name, or for a location without lines
 * "<mapping basename>+0x<file offset>" or "[unknown]". Written into buf
 * when it has to be built; the result points into the profile or buf.
 * (pprof_text.c)
 */
const char *fp_pp_frame_name(const struct fp_pprof *p, uint64_t location_id, size_t line, char *buf,
                             size_t buf_len);

/* The string at index i; "" for 0, FP_PP_NOSTR or anything out of range. */
const char *fp_pp_str(const struct fp_pprof *p, uint32_t i);

/* The index of string s in p, FP_PP_NOSTR when p does not hold it. */
uint32_t fp_pp_find_str(const struct fp_pprof *p, const char *s);

/* Interning on string indices; callers have checked that the indices exist. */
int fp_pp_intern(struct fp_pprof *p, const char *s, size_t len, uint32_t *ret);
int fp_pp_add_type(struct fp_pprof *p, uint32_t type, uint32_t unit);
int fp_pp_intern_mapping(struct fp_pprof *p, const struct fp_pp_mapping *m, uint64_t *ret_id);
int fp_pp_intern_function(struct fp_pprof *p, uint32_t name, uint32_t system_name,
                          uint32_t filename, int64_t start_line, uint64_t *ret_id);
int fp_pp_intern_location(struct fp_pprof *p, uint64_t mapping_id, uint64_t address,
                          const struct fp_pp_line *lines, size_t n_lines, bool is_folded,
                          uint64_t *ret_id);
int fp_pp_add_comment(struct fp_pprof *p, uint32_t text);
/*
 * Adds values to the sample (locs, labels), creating it when new. labels
 * is sorted in place. Location ids must exist and values be >= 0 (checked
 * by the callers: the public add_sample, decode, merge).
 */
int fp_pp_add_sample(struct fp_pprof *p, const uint64_t *locs, size_t n_locs, const int64_t *values,
                     struct fp_pp_label *labels, size_t n_labels);
