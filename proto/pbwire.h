/* SPDX-License-Identifier: MIT */
/*
 * A cursor over the protobuf wire format, for the collector's decoders of
 * hostile input (ingest.c, pyroscope.c, otlp.c): every length is checked
 * against the bytes left, nothing is allocated. -EBADMSG for anything
 * malformed. And a writer of the same format into a growing buffer, for
 * the answers the collector writes and the requests the agent sends in
 * other protocols (pprof_otlp.c, the agent's wire.c).
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

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

/*
 * The next field: its number, wire type, and value (varint; fixed64 and
 * fixed32 little-endian) or bytes (len).
 */
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
                *v = 0;
                for (size_t k = n; k > 0; k--)
                        *v = *v << 8 | c->p[k - 1];
                c->p += n;
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

/* The protobuf being written: a growing buffer. */
struct pbout {
        uint8_t *buf;
        size_t len, cap;
        bool oom;
};

static inline void out_bytes(struct pbout *o, const void *data, size_t n)
{
        if (o->oom || n == 0)
                return;
        if (o->len + n > o->cap) {
                size_t cap = o->cap ? o->cap : 256;
                while (cap < o->len + n)
                        cap *= 2;
                /* (a read's answer: charged to its allowance, fp_budget_charge()) */
                uint8_t *b = fp_budget_charge(cap - o->cap) ? realloc(o->buf, cap) : NULL;
                if (!b) {
                        o->oom = true;
                        return;
                }
                o->buf = b;
                o->cap = cap;
        }
        memcpy(o->buf + o->len, data, n);
        o->len += n;
}

static inline void out_varint(struct pbout *o, uint64_t v)
{
        uint8_t b[10];
        size_t n = 0;

        do {
                b[n] = (uint8_t)(v & 0x7f);
                v >>= 7;
                if (v)
                        b[n] |= 0x80;
                n++;
        } while (v);
        out_bytes(o, b, n);
}

/* Field f of wire type LEN holding n bytes of data. */
static inline void out_len(struct pbout *o, uint32_t f, const void *data, size_t n)
{
        out_varint(o, (uint64_t)f << 3 | WT_LEN);
        out_varint(o, n);
        out_bytes(o, data, n);
}

/* Field f of wire type VARINT. */
static inline void out_uint(struct pbout *o, uint32_t f, uint64_t v)
{
        out_varint(o, (uint64_t)f << 3 | WT_VARINT);
        out_varint(o, v);
}

/* Eight bytes of v, little-endian (a fixed64's value, also packed). */
static inline void out_le64(struct pbout *o, uint64_t v)
{
        uint8_t b[8];

        for (size_t k = 0; k < 8; k++)
                b[k] = (uint8_t)(v >> (8 * k));
        out_bytes(o, b, 8);
}

/* Field f of wire type I64. */
static inline void out_fixed64(struct pbout *o, uint32_t f, uint64_t v)
{
        out_varint(o, (uint64_t)f << 3 | WT_I64);
        out_le64(o, v);
}

/* Field f holding a string. */
static inline void out_str(struct pbout *o, uint32_t f, const char *s)
{
        out_len(o, f, s, strlen(s));
}

/* Field f holding message m (which is emptied, for reuse). */
static inline void out_msg(struct pbout *o, uint32_t f, struct pbout *m)
{
        if (m->oom)
                o->oom = true;
        out_len(o, f, m->buf, m->len);
        m->len = 0;
}
