/* SPDX-License-Identifier: MIT */
/*
 * Protocol buffers' JSON mapping, read into the binary wire format, for
 * the clients that send JSON (Pyroscope's Connect push, OTLP/HTTP): a
 * message is described by a table of its fields (JSON name, the proto
 * name as the other accepted spelling, number, kind), and the body is
 * read once into the bytes the binary decoders take. Unknown keys and
 * nulls are skipped (as OTLP asks of receivers); 64-bit integers are
 * numbers or strings; bytes are base64 (standard or URL-safe); repeated
 * scalars are written packed. Input is hostile: nesting is bounded, every
 * length checked, nothing read past the end.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fp_pbj_kind {
        FP_PBJ_MSG,
        FP_PBJ_STRING,
        FP_PBJ_BYTES,   /* base64 in JSON */
        FP_PBJ_INT,     /* any varint integer: int32, int64, uint32, uint64 */
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
