/* SPDX-License-Identifier: MIT */
/*
 * A cursor over the protobuf wire format, for the collector's decoders of
 * hostile input (ingest.c, pyroscope.c): every length is checked against
 * the bytes left, nothing is allocated. -EBADMSG for anything malformed.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* A cursor over a protobuf message. */
struct pb {
        const uint8_t *p, *end;
};

enum {
        WT_VARINT = 0,
        WT_I64 = 1,
        WT_LEN = 2,
        WT_I32 = 5,
};

static inline int pb_varint(struct pb *c, uint64_t *ret)
{
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 64 && c->p < c->end; shift += 7) {
                uint8_t b = *c->p++;
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* The next field: its number, wire type, and value (varint) or bytes (len). */
static inline int pb_field(struct pb *c, uint32_t *field, unsigned *wt, uint64_t *v, struct pb *sub)
{
        uint64_t tag;

        if (pb_varint(c, &tag) < 0 || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
                return -EBADMSG;
        *field = (uint32_t)(tag >> 3);
        *wt = tag & 7;
        switch (*wt) {
        case WT_VARINT:
                return pb_varint(c, v);
        case WT_I64:
        case WT_I32: {
                size_t n = *wt == WT_I64 ? 8 : 4;
                if ((size_t)(c->end - c->p) < n)
                        return -EBADMSG;
                c->p += n;
                *v = 0;
                return 0;
        }
        case WT_LEN:
                if (pb_varint(c, v) < 0 || *v > (uint64_t)(c->end - c->p))
                        return -EBADMSG;
                *sub = (struct pb){c->p, c->p + *v};
                c->p += *v;
                return 0;
        default:
                return -EBADMSG;
        }
}
