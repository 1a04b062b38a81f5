/* SPDX-License-Identifier: MIT */
/*
 * A small streaming JSON writer: values are written as they come, commas
 * and nesting are tracked, and every string goes through the escaper
 * (escape.h), so the output is valid JSON (and valid UTF-8) whatever
 * bytes the strings hold. Keys and values alternate inside objects:
 *
 *     struct fp_json j;
 *     fp_json_init(&j, fp_write_file, stdout);
 *     fp_json_begin_object(&j);
 *     fp_json_key(&j, "pid");  fp_json_int(&j, 42);
 *     fp_json_key(&j, "comm"); fp_json_string(&j, comm);
 *     fp_json_end_object(&j);
 *
 * Nesting deeper than FP_JSON_MAX_DEPTH is a programming error (abort).
 */
#pragma once

#include "escape.h"

#include <stdbool.h>
#include <stdint.h>

#define FP_JSON_MAX_DEPTH 32

struct fp_json {
        fp_write_fn write;
        void *ctx;
        int depth;
        bool first[FP_JSON_MAX_DEPTH]; /* nothing written yet at this level */
        bool after_key;
};

void fp_json_init(struct fp_json *j, fp_write_fn write, void *ctx);
void fp_json_begin_object(struct fp_json *j);
void fp_json_end_object(struct fp_json *j);
void fp_json_begin_array(struct fp_json *j);
void fp_json_end_array(struct fp_json *j);
void fp_json_key(struct fp_json *j, const char *key);
void fp_json_string(struct fp_json *j, const char *s); /* NULL: "" */
void fp_json_int(struct fp_json *j, int64_t v);
void fp_json_uint(struct fp_json *j, uint64_t v);
/* A number with the given digits after the point; NaN and infinities become null. */
void fp_json_double(struct fp_json *j, double v, int decimals);
void fp_json_bool(struct fp_json *j, bool v);
void fp_json_null(struct fp_json *j);
