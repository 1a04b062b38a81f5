/* SPDX-License-Identifier: MIT */
/*
 * Protocol buffers' JSON mapping, both ways, for the clients that speak
 * JSON (Pyroscope's Connect push and query API, OTLP/HTTP): a message is
 * described by a table of its fields (JSON name, the proto name as the
 * other accepted spelling, number, kind).
 *
 * Reading: the body is read once into the bytes the binary decoders
 * take. Unknown keys and nulls are skipped (as OTLP asks of receivers);
 * 64-bit integers are numbers or strings; enums names or numbers; bytes
 * are base64 (standard or URL-safe); repeated scalars are written
 * packed. Input is hostile: nesting is bounded, every length checked,
 * nothing read past the end.
 *
 * Writing: a message the collector encoded in binary into its JSON, by
 * the same tables: every field present (repeated ones as arrays, packed
 * or not), 64-bit integers as strings, enums by name, bytes as base64.
 */
#pragma once

#include "escape.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fp_pbj_kind {
        FP_PBJ_MSG,
        FP_PBJ_STRING,
        FP_PBJ_BYTES,   /* base64 in JSON */
        FP_PBJ_INT,     /* any varint integer: int32, int64, uint32 (written signed) */
        FP_PBJ_UINT,    /* a uint64 varint (written unsigned) */
        FP_PBJ_ENUM,    /* a varint; its names in enum_names */
        FP_PBJ_BOOL,    /* a varint */
        FP_PBJ_FIXED64, /* an integer as fixed64 */
        FP_PBJ_DOUBLE,  /* a number as fixed64 */
        FP_PBJ_SKIP,    /* read and left out (hex IDs, ...) */
};

struct fp_pbj_msg;

struct fp_pbj_field {
        const char *json;  /* lowerCamelCase */
        const char *proto; /* snake_case, also taken; NULL: the same */
        uint32_t number;
        enum fp_pbj_kind kind;
        bool repeated;
        const struct fp_pbj_msg *msg; /* FP_PBJ_MSG */
        /* FP_PBJ_ENUM: names by value, NULL-terminated (a value past them: its number). */
        const char *const *enum_names;
};

struct fp_pbj_msg {
        const char *name; /* for errors: "an ExportProfilesServiceRequest" */
        const struct fp_pbj_field *fields;
        size_t n_fields;
};

/*
 * A JSON body holding one message of type root into its binary form
 * (*ret malloc'd). 0, -EINVAL with a line in err, or -ENOMEM.
 */
int fp_pbjson_read(const uint8_t *body, size_t len, const struct fp_pbj_msg *root, uint8_t **ret,
                   size_t *ret_len, char *err, size_t errlen);

/*
 * The binary message buf of type root as JSON, through w. 0, or
 * -EBADMSG when buf is not such a message (what was written is then
 * not valid JSON).
 */
int fp_pbjson_write(const uint8_t *buf, size_t len, const struct fp_pbj_msg *root, fp_write_fn w,
                    void *ctx);
