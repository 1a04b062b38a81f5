/* SPDX-License-Identifier: MIT */
/*
 * pprof profiles on the wire: profile.proto encoding and decoding, with
 * optional gzip.
 *
 * Encoding writes the protobuf wire format directly from the interned
 * model: one growing buffer, each sample or location assembled in a reused
 * scratch buffer and appended with its length, so a large profile costs no
 * allocation per sample. proto3 defaults (zero scalars) are left out, as
 * every protobuf encoder does.
 *
 * Decoding treats its input as hostile. Inflating stops as soon as the
 * output would pass max_size, without allocating beyond it; protobuf-c's
 * unpack runs under an allocator with a budget proportional to the input;
 * and the unpacked message is checked field by field (string indices, ids,
 * references, value counts, signs) while it is interned into a fresh
 * struct fp_pprof, so what comes out obeys every invariant of
 * pprof-internal.h. The first problem found is described in one line in
 * errbuf.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof-internal.h"
#include "profile.pb-c.h"

/* ---- wire writer ---- */

enum {
        WT_VARINT = 0,
        WT_LEN = 2,
};

struct wbuf {
        uint8_t *d;
        size_t len;
        size_t cap;
        bool oom;
};

/* Room for n more bytes at b->d + b->len, or NULL (and b->oom) when out of memory. */
static uint8_t *wb_room(struct wbuf *b, size_t n)
{
        if (b->oom)
                return NULL;
        if (n > SIZE_MAX - b->len || FP_PP_GROW(b->d, b->cap, b->len + n) < 0) {
                b->oom = true;
                return NULL;
        }
        return b->d + b->len;
}

static size_t varint_len(uint64_t v)
{
        size_t n = 1;

        while (v >= 0x80) {
                v >>= 7;
                n++;
        }
        return n;
}

static size_t put_varint(uint8_t *d, uint64_t v)
{
        size_t n = 0;

        while (v >= 0x80) {
                d[n++] = (uint8_t)(v | 0x80);
                v >>= 7;
        }
        d[n++] = (uint8_t)v;
        return n;
}

/* A varint field (all our field numbers are < 16: one-byte keys); 0 is left out. */
static size_t put_uint(uint8_t *d, unsigned field, uint64_t v)
{
        if (!v)
                return 0;
        d[0] = (uint8_t)(field << 3 | WT_VARINT);
        return 1 + put_varint(d + 1, v);
}

/* The same for a field past 15, whose key takes two bytes or more. */
static size_t put_uint_far(uint8_t *d, unsigned field, uint64_t v)
{
        if (!v)
                return 0;
        size_t n = put_varint(d, (uint64_t)field << 3 | WT_VARINT);
        return n + put_varint(d + n, v);
}

static void wb_uint(struct wbuf *b, unsigned field, uint64_t v)
{
        uint8_t *d = wb_room(b, 11);

        if (d)
                b->len += put_uint(d, field, v);
}

static void wb_msg(struct wbuf *b, unsigned field, const void *data, size_t len)
{
        uint8_t *d = wb_room(b, 11 + len);
        size_t n;

        if (!d)
                return;
        d[0] = (uint8_t)(field << 3 | WT_LEN);
        n = 1 + put_varint(d + 1, len);
        if (len)
                memcpy(d + n, data, len);
        b->len += n + len;
}

static void wb_packed(struct wbuf *b, unsigned field, const void *vals, size_t count)
{
        const uint64_t *v = vals; /* int64 values are encoded as their uint64 bits */
        size_t payload = 0, n;
        uint8_t *d;

        if (!count)
                return;
        for (size_t i = 0; i < count; i++)
                payload += varint_len(v[i]);
        d = wb_room(b, 11 + payload);
        if (!d)
                return;
        d[0] = (uint8_t)(field << 3 | WT_LEN);
        n = 1 + put_varint(d + 1, payload);
        for (size_t i = 0; i < count; i++)
                n += put_varint(d + n, v[i]);
        b->len += n;
}

static void wb_vtype(struct wbuf *b, unsigned field, const struct fp_pp_vtype *t)
{
        uint8_t tmp[32];
        size_t n = 0;

        n += put_uint(tmp + n, 1, t->type);
        n += put_uint(tmp + n, 2, t->unit);
        wb_msg(b, field, tmp, n);
}

static void encode_sample(const struct fp_pprof *p, size_t i, struct wbuf *sub)
{
        const struct fp_pp_sample *s = &p->samples[i];

        sub->len = 0;
        wb_packed(sub, 1, &p->sample_locs[s->loc_off], s->n_locs);
        wb_packed(sub, 2, &p->values[i * p->n_types], p->n_types);
        for (size_t j = 0; j < s->n_labels; j++) {
                const struct fp_pp_label *l = &p->sample_labels[s->label_off + j];
                uint8_t tmp[64];
                size_t n = 0;

                n += put_uint(tmp + n, 1, l->key);
                if (l->str != FP_PP_NOSTR) {
                        n += put_uint(tmp + n, 2, l->str);
                } else {
                        n += put_uint(tmp + n, 3, (uint64_t)l->num);
                        n += put_uint(tmp + n, 4, l->unit);
                }
                wb_msg(sub, 3, tmp, n);
        }
}

static void encode_location(const struct fp_pprof *p, size_t i, struct wbuf *sub)
{
        const struct fp_pp_location *l = &p->locations[i];

        sub->len = 0;
        wb_uint(sub, 1, i + 1);
        wb_uint(sub, 2, l->mapping_id);
        wb_uint(sub, 3, l->address);
        for (size_t j = 0; j < l->n_lines; j++) {
                const struct fp_pp_line *ln = &p->lines[l->line_off + j];
                uint8_t tmp[32];
                size_t n = 0;

                n += put_uint(tmp + n, 1, ln->function_id);
                n += put_uint(tmp + n, 2, (uint64_t)ln->line);
                wb_msg(sub, 4, tmp, n);
        }
        wb_uint(sub, 5, l->is_folded);
}

/*
 * The has_* flags a mapping earns from what its locations carry, or'ed
 * with those it came with: pprof only symbolises mappings without
 * functions, so a symbolised mapping must say so.
 */
static uint32_t *mapping_flags(const struct fp_pprof *p)
{
        uint32_t *flags = fp_pp_calloc(p->n_mappings + 1, sizeof(*flags));

        if (!flags)
                return NULL;
        for (size_t i = 0; i < p->n_mappings; i++)
                flags[i + 1] = p->mappings[i].flags;
        for (size_t i = 0; i < p->n_locations; i++) {
                const struct fp_pp_location *l = &p->locations[i];
                uint32_t *f = &flags[l->mapping_id];

                if (l->n_lines > 1)
                        *f |= FP_PP_HAS_INLINE_FRAMES;
                for (size_t j = 0; j < l->n_lines; j++) {
                        const struct fp_pp_line *ln = &p->lines[l->line_off + j];

                        if (ln->line > 0)
                                *f |= FP_PP_HAS_LINE_NUMBERS;
                        if (!ln->function_id)
                                continue;
                        *f |= FP_PP_HAS_FUNCTIONS;
                        if (p->functions[ln->function_id - 1].filename)
                                *f |= FP_PP_HAS_FILENAMES;
                }
        }
        return flags;
}

static void encode_mapping(const struct fp_pprof *p, size_t i, uint32_t flags, struct wbuf *b)
{
        const struct fp_pp_mapping *m = &p->mappings[i];
        uint8_t tmp[112];
        size_t n = 0;

        n += put_uint(tmp + n, 1, i + 1);
        n += put_uint(tmp + n, 2, m->start);
        n += put_uint(tmp + n, 3, m->limit);
        n += put_uint(tmp + n, 4, m->offset);
        n += put_uint(tmp + n, 5, m->filename);
        n += put_uint(tmp + n, 6, m->build_id);
        n += put_uint(tmp + n, 7, !!(flags & FP_PP_HAS_FUNCTIONS));
        n += put_uint(tmp + n, 8, !!(flags & FP_PP_HAS_FILENAMES));
        n += put_uint(tmp + n, 9, !!(flags & FP_PP_HAS_LINE_NUMBERS));
        n += put_uint(tmp + n, 10, !!(flags & FP_PP_HAS_INLINE_FRAMES));
        n += put_uint_far(tmp + n, 100, m->vaddr1);
        wb_msg(b, 3, tmp, n);
}

static void encode_function(const struct fp_pprof *p, size_t i, struct wbuf *b)
{
        const struct fp_pp_function *f = &p->functions[i];
        uint8_t tmp[64];
        size_t n = 0;

        n += put_uint(tmp + n, 1, i + 1);
        n += put_uint(tmp + n, 2, f->name);
        n += put_uint(tmp + n, 3, f->system_name);
        n += put_uint(tmp + n, 4, f->filename);
        n += put_uint(tmp + n, 5, (uint64_t)f->start_line);
        wb_msg(b, 5, tmp, n);
}

static int encode_raw(const struct fp_pprof *p, struct wbuf *b)
{
        struct wbuf sub = {0};
        uint32_t *flags = mapping_flags(p);
        uint64_t *comments = NULL;

        if (!flags)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_types; i++)
                wb_vtype(b, 1, &p->types[i]);
        for (size_t i = 0; i < p->n_samples && !b->oom; i++) {
                encode_sample(p, i, &sub);
                if (sub.oom)
                        b->oom = true;
                wb_msg(b, 2, sub.d, sub.len);
        }
        if (p->main_mapping)
                encode_mapping(p, p->main_mapping - 1, flags[p->main_mapping], b);
        for (size_t i = 0; i < p->n_mappings; i++)
                if (i + 1 != p->main_mapping)
                        encode_mapping(p, i, flags[i + 1], b);
        for (size_t i = 0; i < p->n_locations && !b->oom; i++) {
                encode_location(p, i, &sub);
                if (sub.oom)
                        b->oom = true;
                wb_msg(b, 4, sub.d, sub.len);
        }
        for (size_t i = 0; i < p->n_functions; i++)
                encode_function(p, i, b);
        for (size_t i = 0; i < p->n_strs; i++)
                wb_msg(b, 6, p->strs[i].s, p->strs[i].len);
        wb_uint(b, 7, p->drop_frames);
        wb_uint(b, 8, p->keep_frames);
        wb_uint(b, 9, (uint64_t)p->time_nanos);
        wb_uint(b, 10, (uint64_t)p->duration_nanos);
        if (p->period_type.type || p->period_type.unit)
                wb_vtype(b, 11, &p->period_type);
        wb_uint(b, 12, (uint64_t)p->period);
        if (p->n_comments) {
                comments = fp_pp_calloc(p->n_comments, sizeof(*comments));
                if (!comments)
                        b->oom = true;
                for (size_t i = 0; comments && i < p->n_comments; i++)
                        comments[i] = p->comments[i];
                wb_packed(b, 13, comments, comments ? p->n_comments : 0);
        }
        wb_uint(b, 14, p->default_type);
        free(comments);
        free(sub.d);
        free(flags);
        return b->oom ? -ENOMEM : 0;
}

/* gzip (RFC 1952 wrapper) of in[0..len), into a malloc'd buffer. */
static int gzip_compress(const uint8_t *in, size_t len, uint8_t **ret, size_t *ret_len)
{
        z_stream z = {0};
        uint8_t *out;
        size_t cap, in_off = 0, out_off = 0;
        int r;

        if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
            Z_OK)
                return -ENOMEM;
        cap = deflateBound(&z, len);
        out = fp_pp_malloc(cap ? cap : 1);
        if (!out) {
                deflateEnd(&z);
                return -ENOMEM;
        }
        for (;;) {
                size_t chunk;

                if (z.avail_in == 0 && in_off < len) {
                        chunk = len - in_off < UINT32_MAX ? len - in_off : UINT32_MAX;
                        z.next_in = (Bytef *)(uintptr_t)(in + in_off);
                        z.avail_in = (uInt)chunk;
                        in_off += chunk;
                }
                if (out_off == cap) {
                        /* deflateBound() is an upper bound; this is only belt and braces. */
                        size_t ncap = cap;
                        uint8_t *n = fp_pp_grow(out, &ncap, cap + 1, 1);

                        if (!n) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        out = n;
                        cap = ncap;
                }
                chunk = cap - out_off < UINT32_MAX ? cap - out_off : UINT32_MAX;
                z.next_out = out + out_off;
                z.avail_out = (uInt)chunk;
                r = deflate(&z, in_off == len ? Z_FINISH : Z_NO_FLUSH);
                out_off += chunk - z.avail_out;
                if (r == Z_STREAM_END)
                        break;
                if (r != Z_OK && r != Z_BUF_ERROR) {
                        r = -EIO;
                        goto fail;
                }
        }
        deflateEnd(&z);
        *ret = out;
        *ret_len = out_off;
        return 0;
fail:
        deflateEnd(&z);
        free(out);
        return r;
}

int fp_pprof_gzip(const uint8_t *in, size_t len, uint8_t **ret, size_t *ret_len)
{
        return gzip_compress(in, len, ret, ret_len);
}

int fp_pprof_encode(const struct fp_pprof *p, int gzip, uint8_t **ret_buf, size_t *ret_len)
{
        struct wbuf b = {0};
        int r;

        if (!p || !ret_buf || !ret_len)
                return -EINVAL;
        r = encode_raw(p, &b);
        if (r < 0) {
                free(b.d);
                return r;
        }
        if (gzip) {
                uint8_t *z;
                size_t zlen;

                r = gzip_compress(b.d, b.len, &z, &zlen);
                free(b.d);
                if (r < 0)
                        return r;
                *ret_buf = z;
                *ret_len = zlen;
                return 0;
        }
        if (!b.d) {
                b.d = fp_pp_malloc(1);
                if (!b.d)
                        return -ENOMEM;
        }
        *ret_buf = b.d;
        *ret_len = b.len;
        return 0;
}

/* ---- decoding ---- */

__attribute__((format(printf, 4, 5))) static int fail(char *errbuf, size_t errbuf_len, int r,
                                                      const char *fmt, ...)
{
        va_list ap;

        if (errbuf && errbuf_len) {
                va_start(ap, fmt);
                vsnprintf(errbuf, errbuf_len, fmt, ap);
                va_end(ap);
        }
        return r;
}

/*
 * Inflates gzip data (one or more members) into a malloc'd buffer of at
 * most max_size bytes. Output grows by doubling from a guess; once it is
 * max_size long, one more byte of output means -EFBIG, so a bomb costs at
 * most max_size of memory and the time to inflate that much.
 */
static int gunzip(const uint8_t *in, size_t len, size_t max_size, uint8_t **ret, size_t *ret_len,
                  char *errbuf, size_t errbuf_len)
{
        z_stream z = {0};
        uint8_t *out = NULL;
        size_t cap, in_off = 0, out_off = 0;
        int r, zr;

        if (inflateInit2(&z, 15 + 16) != Z_OK)
                return fail(errbuf, errbuf_len, -ENOMEM, "cannot set up gzip decompression");
        cap = len < SIZE_MAX / 4 ? len * 4 : SIZE_MAX;
        if (cap < 65536)
                cap = 65536;
        if (cap > max_size)
                cap = max_size;
        out = fp_pp_malloc(cap ? cap : 1);
        if (!out) {
                r = fail(errbuf, errbuf_len, -ENOMEM, "out of memory inflating gzip data");
                goto fail;
        }
        for (;;) {
                if (z.avail_in == 0 && in_off < len) {
                        size_t chunk = len - in_off < UINT32_MAX ? len - in_off : UINT32_MAX;

                        z.next_in = (Bytef *)(uintptr_t)(in + in_off);
                        z.avail_in = (uInt)chunk;
                        in_off += chunk;
                }
                if (out_off == cap && cap < max_size) {
                        size_t ncap = cap > max_size / 2 ? max_size : cap * 2;
                        uint8_t *n = fp_pp_realloc(out, ncap);

                        if (!n) {
                                r = fail(errbuf, errbuf_len, -ENOMEM,
                                         "out of memory inflating gzip data");
                                goto fail;
                        }
                        out = n;
                        cap = ncap;
                }
                if (out_off == cap) {
                        uint8_t probe;

                        z.next_out = &probe;
                        z.avail_out = 1;
                        zr = inflate(&z, Z_NO_FLUSH);
                        if (z.avail_out == 0) {
                                r = fail(errbuf, errbuf_len, -EFBIG,
                                         "decompressed profile is larger than %zu bytes", max_size);
                                goto fail;
                        }
                } else {
                        size_t chunk = cap - out_off < UINT32_MAX ? cap - out_off : UINT32_MAX;

                        z.next_out = out + out_off;
                        z.avail_out = (uInt)chunk;
                        zr = inflate(&z, Z_NO_FLUSH);
                        out_off += chunk - z.avail_out;
                }
                if (zr == Z_STREAM_END) {
                        size_t rest = z.avail_in + (len - in_off);

                        if (rest == 0)
                                break;
                        /* Another gzip member follows: concatenated files are one file. */
                        if (rest >= 2 && z.avail_in >= 2 && z.next_in[0] == 0x1f &&
                            z.next_in[1] == 0x8b) {
                                inflateReset(&z);
                                continue;
                        }
                        r = fail(errbuf, errbuf_len, -EBADMSG,
                                 "%zu bytes of trailing garbage after gzip data", rest);
                        goto fail;
                }
                if (zr == Z_BUF_ERROR && z.avail_in == 0 && in_off == len) {
                        r = fail(errbuf, errbuf_len, -EBADMSG, "gzip data is truncated");
                        goto fail;
                }
                if (zr != Z_OK && zr != Z_BUF_ERROR) {
                        r = fail(errbuf, errbuf_len, zr == Z_MEM_ERROR ? -ENOMEM : -EBADMSG,
                                 "corrupt gzip data: %s", z.msg ? z.msg : "inflate failed");
                        goto fail;
                }
        }
        inflateEnd(&z);
        *ret = out;
        *ret_len = out_off;
        return 0;
fail:
        inflateEnd(&z);
        free(out);
        return r;
}

/*
 * protobuf-c allocates in proportion to what the input declares; this
 * allocator caps the total (freed memory is not given back to the budget,
 * so the cap is on the sum of allocations, an upper bound of the peak).
 * Since nothing is given back, it allocates from chunks by bumping a
 * pointer and frees the chunks at the end: unpacking a profile makes an
 * allocation per sample, label and location, and malloc was half its cost.
 */
#define PB_CHUNK ((size_t)64 << 10)

struct pb_chunk {
        struct pb_chunk *next;
        size_t used, size;
        max_align_t data[];
};

struct pb_budget {
        size_t used;
        size_t limit;
        bool exceeded;
        bool oom;
        struct pb_chunk *chunks;
};

static void *pb_alloc(void *data, size_t size)
{
        struct pb_budget *b = data;
        struct pb_chunk *c = b->chunks;
        size_t need = (size + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);

        if (size > b->limit - b->used || need < size) {
                b->exceeded = true;
                return NULL;
        }
        b->used += size;
        if (!c || c->size - c->used < need) {
                size_t n = need > PB_CHUNK ? need : PB_CHUNK;
                c = fp_pp_malloc(sizeof(*c) + n);
                if (!c) {
                        b->oom = true;
                        return NULL;
                }
                *c = (struct pb_chunk){.next = b->chunks, .size = n};
                b->chunks = c;
        }
        void *ptr = (uint8_t *)c->data + c->used;
        c->used += need;
        return ptr;
}

static void pb_free(void *data, void *ptr)
{
        (void)data;
        (void)ptr; /* the chunks go at once, in pb_release */
}

static void pb_release(struct pb_budget *b)
{
        while (b->chunks) {
                struct pb_chunk *c = b->chunks;
                b->chunks = c->next;
                free(c);
        }
}

/* Maps the ids of a decoded message's entities to the ids interned for them. */
struct idmap {
        struct fp_pp_itab tab;
        uint64_t seed;
        uint64_t *keys;
        uint64_t *vals;
        size_t n;
};

struct idmap_key {
        const struct idmap *m;
        uint64_t id;
};

static bool idmap_eq(const void *ctx, uint32_t idx)
{
        const struct idmap_key *k = ctx;

        return k->m->keys[idx] == k->id;
}

static int idmap_init(struct idmap *m, uint64_t seed, size_t count)
{
        *m = (struct idmap){.seed = seed};
        m->keys = fp_pp_calloc(count ? count : 1, sizeof(*m->keys));
        m->vals = fp_pp_calloc(count ? count : 1, sizeof(*m->vals));
        return m->keys && m->vals ? 0 : -ENOMEM;
}

static void idmap_done(struct idmap *m)
{
        fp_pp_itab_done(&m->tab);
        free(m->keys);
        free(m->vals);
}

/* Adds id -> val; -EEXIST when id is already there. Room for count entries was made by init. */
static int idmap_add(struct idmap *m, uint64_t id, uint64_t val)
{
        struct idmap_key k = {m, id};
        uint32_t h = fp_pp_hash_final(fp_pp_hash_step(m->seed, id));
        size_t slot;
        bool found;
        int r;

        r = fp_pp_itab_reserve(&m->tab);
        if (r < 0)
                return r;
        slot = fp_pp_itab_find(&m->tab, h, idmap_eq, &k, &found);
        if (found)
                return -EEXIST;
        m->keys[m->n] = id;
        m->vals[m->n] = val;
        fp_pp_itab_set(&m->tab, slot, h, (uint32_t)m->n++);
        return 0;
}

/* The interned id for id, 0 when there is none. */
static uint64_t idmap_get(struct idmap *m, uint64_t id)
{
        struct idmap_key k = {m, id};
        uint32_t h = fp_pp_hash_final(fp_pp_hash_step(m->seed, id));
        size_t slot;
        bool found;

        if (m->tab.cap == 0)
                return 0;
        slot = fp_pp_itab_find(&m->tab, h, idmap_eq, &k, &found);
        return found ? m->vals[m->tab.slots[slot].idx1 - 1] : 0;
}

struct decoder {
        const Perftools__Profiles__Profile *m;
        struct fp_pprof *p;
        uint32_t *smap; /* string index in m -> string index in p */
        struct idmap mappings, functions, locations;
        char *errbuf;
        size_t errbuf_len;
};

/* Translates string index i of the message, or fails naming what it belongs to. */
static int dstr(struct decoder *d, int64_t i, uint32_t *ret, const char *what, size_t n)
{
        if (i < 0 || (uint64_t)i >= d->m->n_string_table)
                return fail(d->errbuf, d->errbuf_len, -EBADMSG,
                            "%s %zu: string index %" PRId64 " outside the string table (%zu)", what,
                            n, i, d->m->n_string_table);
        *ret = d->smap[i];
        return 0;
}

static int decode_header(struct decoder *d)
{
        const Perftools__Profiles__Profile *m = d->m;
        struct fp_pprof *p = d->p;
        uint32_t a, b;
        int r;

        if (m->n_string_table == 0 || m->string_table[0][0] != 0)
                return fail(d->errbuf, d->errbuf_len, -EBADMSG,
                            "string table does not start with the empty string");
        d->smap = fp_pp_calloc(m->n_string_table, sizeof(*d->smap));
        if (!d->smap)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_string_table; i++) {
                r = fp_pp_intern(p, m->string_table[i], strlen(m->string_table[i]), &d->smap[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < m->n_sample_type; i++) {
                if ((r = dstr(d, m->sample_type[i]->type, &a, "sample type", i)) < 0 ||
                    (r = dstr(d, m->sample_type[i]->unit, &b, "sample type", i)) < 0)
                        return r;
                r = fp_pp_add_type(p, a, b);
                if (r < 0)
                        return r;
        }
        if (m->period_type) {
                if ((r = dstr(d, m->period_type->type, &a, "period type", 0)) < 0 ||
                    (r = dstr(d, m->period_type->unit, &b, "period type", 0)) < 0)
                        return r;
                p->period_type = (struct fp_pp_vtype){a, b};
        }
        p->period = m->period;
        p->time_nanos = m->time_nanos;
        p->duration_nanos = m->duration_nanos;
        if ((r = dstr(d, m->default_sample_type, &p->default_type, "default sample type", 0)) < 0 ||
            (r = dstr(d, m->drop_frames, &p->drop_frames, "drop_frames", 0)) < 0 ||
            (r = dstr(d, m->keep_frames, &p->keep_frames, "keep_frames", 0)) < 0)
                return r;
        for (size_t i = 0; i < m->n_comment; i++) {
                if ((r = dstr(d, m->comment[i], &a, "comment", i)) < 0)
                        return r;
                r = fp_pp_add_comment(p, a);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_id(struct decoder *d, struct idmap *map, const char *what, size_t i, uint64_t id,
                  uint64_t val)
{
        int r;

        if (id == 0)
                return fail(d->errbuf, d->errbuf_len, -EBADMSG, "%s %zu has id 0", what, i);
        r = idmap_add(map, id, val);
        if (r == -EEXIST)
                return fail(d->errbuf, d->errbuf_len, -EBADMSG, "%s id %" PRIu64 " is not unique",
                            what, id);
        return r;
}

static int decode_mappings(struct decoder *d)
{
        const Perftools__Profiles__Profile *m = d->m;
        int r;

        r = idmap_init(&d->mappings, d->p->seed, m->n_mapping);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_mapping; i++) {
                const Perftools__Profiles__Mapping *x = m->mapping[i];
                struct fp_pp_mapping mp = {
                    .start = x->memory_start,
                    .limit = x->memory_limit,
                    .offset = x->file_offset,
                    .vaddr1 = x->fleetprof_vaddr_plus_one,
                    .flags = (x->has_functions ? FP_PP_HAS_FUNCTIONS : 0) |
                             (x->has_filenames ? FP_PP_HAS_FILENAMES : 0) |
                             (x->has_line_numbers ? FP_PP_HAS_LINE_NUMBERS : 0) |
                             (x->has_inline_frames ? FP_PP_HAS_INLINE_FRAMES : 0),
                };
                uint64_t id;

                if ((r = dstr(d, x->filename, &mp.filename, "mapping", i)) < 0 ||
                    (r = dstr(d, x->build_id, &mp.build_id, "mapping", i)) < 0)
                        return r;
                r = fp_pp_intern_mapping(d->p, &mp, &id);
                if (r < 0)
                        return r;
                r = add_id(d, &d->mappings, "mapping", i, x->id, id);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode_functions(struct decoder *d)
{
        const Perftools__Profiles__Profile *m = d->m;
        int r;

        r = idmap_init(&d->functions, d->p->seed, m->n_function);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_function; i++) {
                const Perftools__Profiles__Function *x = m->function[i];
                uint32_t name, sys, file;
                uint64_t id;

                if ((r = dstr(d, x->name, &name, "function", i)) < 0 ||
                    (r = dstr(d, x->system_name, &sys, "function", i)) < 0 ||
                    (r = dstr(d, x->filename, &file, "function", i)) < 0)
                        return r;
                r = fp_pp_intern_function(d->p, name, sys, file, x->start_line, &id);
                if (r < 0)
                        return r;
                r = add_id(d, &d->functions, "function", i, x->id, id);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode_locations(struct decoder *d)
{
        const Perftools__Profiles__Profile *m = d->m;
        struct fp_pprof *p = d->p;
        int r;

        r = idmap_init(&d->locations, p->seed, m->n_location);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_location; i++) {
                const Perftools__Profiles__Location *x = m->location[i];
                uint64_t mid = 0, id;

                if (x->mapping_id) {
                        mid = idmap_get(&d->mappings, x->mapping_id);
                        if (!mid)
                                return fail(d->errbuf, d->errbuf_len, -EBADMSG,
                                            "location %zu refers to mapping %" PRIu64
                                            ", which does not exist",
                                            i, x->mapping_id);
                }
                if (FP_PP_GROW(p->scratch_lines, p->cap_scratch_lines, x->n_line) < 0)
                        return -ENOMEM;
                for (size_t j = 0; j < x->n_line; j++) {
                        uint64_t fid = x->line[j]->function_id;

                        if (fid) {
                                fid = idmap_get(&d->functions, fid);
                                if (!fid)
                                        return fail(d->errbuf, d->errbuf_len, -EBADMSG,
                                                    "location %zu refers to function %" PRIu64
                                                    ", which does not exist",
                                                    i, x->line[j]->function_id);
                        }
                        p->scratch_lines[j] = (struct fp_pp_line){fid, x->line[j]->line};
                }
                r = fp_pp_intern_location(p, mid, x->address, p->scratch_lines, x->n_line,
                                          x->is_folded, &id);
                if (r < 0)
                        return r;
                r = add_id(d, &d->locations, "location", i, x->id, id);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode_label(struct decoder *d, size_t i, const Perftools__Profiles__Label *x,
                        struct fp_pp_label *l)
{
        int r;

        *l = (struct fp_pp_label){.str = FP_PP_NOSTR};
        if ((r = dstr(d, x->key, &l->key, "label of sample", i)) < 0 ||
            (r = dstr(d, x->str, &l->str, "label of sample", i)) < 0 ||
            (r = dstr(d, x->num_unit, &l->unit, "label of sample", i)) < 0)
                return r;
        if (x->str != 0) {
                l->unit = 0; /* a unit means nothing on a string label */
        } else {
                l->str = FP_PP_NOSTR;
                l->num = x->num;
        }
        return 0;
}

static int decode_samples(struct decoder *d)
{
        const Perftools__Profiles__Profile *m = d->m;
        struct fp_pprof *p = d->p;
        int r;

        for (size_t i = 0; i < m->n_sample; i++) {
                const Perftools__Profiles__Sample *x = m->sample[i];

                if (x->n_value != p->n_types)
                        return fail(d->errbuf, d->errbuf_len, -EBADMSG,
                                    "sample %zu has %zu values for %zu sample types", i, x->n_value,
                                    p->n_types);
                for (size_t j = 0; j < x->n_value; j++)
                        if (x->value[j] < 0)
                                return fail(d->errbuf, d->errbuf_len, -EBADMSG,
                                            "sample %zu has a negative value (%" PRId64 ")", i,
                                            x->value[j]);
                if (FP_PP_GROW(p->scratch_locs, p->cap_scratch_locs, x->n_location_id) < 0 ||
                    FP_PP_GROW(p->scratch_labels, p->cap_scratch_labels, x->n_label) < 0)
                        return -ENOMEM;
                for (size_t j = 0; j < x->n_location_id; j++) {
                        p->scratch_locs[j] = idmap_get(&d->locations, x->location_id[j]);
                        if (!p->scratch_locs[j])
                                return fail(d->errbuf, d->errbuf_len, -EBADMSG,
                                            "sample %zu refers to location %" PRIu64
                                            ", which does not exist",
                                            i, x->location_id[j]);
                }
                for (size_t j = 0; j < x->n_label; j++) {
                        r = decode_label(d, i, x->label[j], &p->scratch_labels[j]);
                        if (r < 0)
                                return r;
                }
                r = fp_pp_add_sample(p, p->scratch_locs, x->n_location_id, x->value,
                                     p->scratch_labels, x->n_label);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode_message(const Perftools__Profiles__Profile *m, struct fp_pprof **ret,
                          char *errbuf, size_t errbuf_len)
{
        struct decoder d = {.m = m, .errbuf = errbuf, .errbuf_len = errbuf_len};
        int r;

        d.p = fp_pprof_new();
        if (!d.p)
                return fail(errbuf, errbuf_len, -ENOMEM, "out of memory decoding a profile");
        r = decode_header(&d);
        if (r >= 0)
                r = decode_mappings(&d);
        if (r >= 0)
                r = decode_functions(&d);
        if (r >= 0)
                r = decode_locations(&d);
        if (r >= 0)
                r = decode_samples(&d);
        free(d.smap);
        idmap_done(&d.mappings);
        idmap_done(&d.functions);
        idmap_done(&d.locations);
        if (r < 0) {
                if (errbuf && errbuf_len && !errbuf[0])
                        fail(errbuf, errbuf_len, r, "cannot decode profile: %s", strerror(-r));
                fp_pprof_free(d.p);
                return r;
        }
        *ret = d.p;
        return 0;
}

int fp_pprof_gunzip(const uint8_t *buf, size_t len, size_t max_size, uint8_t **ret, size_t *ret_len,
                    char *errbuf, size_t errbuf_len)
{
        if (errbuf && errbuf_len)
                errbuf[0] = 0;
        if (!buf || !ret || !ret_len)
                return fail(errbuf, errbuf_len, -EINVAL, "invalid arguments");
        return gunzip(buf, len, max_size ? max_size : FP_PPROF_DEFAULT_MAX_SIZE, ret, ret_len,
                      errbuf, errbuf_len);
}

int fp_pprof_decode(const uint8_t *buf, size_t len, size_t max_size, struct fp_pprof **ret,
                    char *errbuf, size_t errbuf_len)
{
        Perftools__Profiles__Profile *m;
        uint8_t *raw = NULL;
        const uint8_t *data = buf;
        size_t data_len = len;
        struct pb_budget budget;
        ProtobufCAllocator alloc = {pb_alloc, pb_free, &budget};
        int r;

        if (errbuf && errbuf_len)
                errbuf[0] = 0;
        if ((!buf && len) || !ret)
                return fail(errbuf, errbuf_len, -EINVAL, "invalid arguments");
        if (max_size == 0)
                max_size = FP_PPROF_DEFAULT_MAX_SIZE;
        if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
                r = gunzip(buf, len, max_size, &raw, &data_len, errbuf, errbuf_len);
                if (r < 0)
                        return r;
                data = raw;
        } else if (len > max_size) {
                return fail(errbuf, errbuf_len, -EFBIG, "profile is larger than %zu bytes",
                            max_size);
        }

        budget = (struct pb_budget){
            .limit =
                data_len > (SIZE_MAX - (4u << 20)) / 32 ? SIZE_MAX : data_len * 32 + (4u << 20),
        };
        m = perftools__profiles__profile__unpack(&alloc, data_len, data);
        if (!m) {
                pb_release(&budget);
                free(raw);
                if (budget.oom)
                        return fail(errbuf, errbuf_len, -ENOMEM,
                                    "out of memory decoding a profile of %zu bytes", data_len);
                if (budget.exceeded)
                        return fail(errbuf, errbuf_len, -EFBIG,
                                    "profile of %zu bytes needs more than %zu bytes of memory "
                                    "to decode",
                                    data_len, budget.limit);
                return fail(errbuf, errbuf_len, -EBADMSG, "not a profile.proto message (%zu bytes)",
                            data_len);
        }
        r = decode_message(m, ret, errbuf, errbuf_len);
        perftools__profiles__profile__free_unpacked(m, &alloc);
        pb_release(&budget);
        free(raw);
        return r;
}
