/* SPDX-License-Identifier: MIT */
/*
 * Protocol buffers' JSON mapping into the wire format; see pbjson.h.
 *
 * A small recursive reader: jstring, jobject and jarray walk the text
 * (depth bounded by JSON_MAX_DEPTH), and jmessage writes each key's value
 * as its field, by the message's table, into a growing buffer that
 * becomes the field of its parent.
 */
#include "pbjson.h"
#include "json.h"
#include "pbwire.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 32

struct jcur {
        const char *p, *end;
        int depth;
        const char *what; /* the root message's name */
        char *err;
        size_t errlen;
};

static int jfail(struct jcur *c, const char *what)
{
        return fp_errf(c->err, c->errlen, -EINVAL, "not %s in JSON: %s", c->what, what);
}

static void jspace(struct jcur *c)
{
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
                c->p++;
}

static bool jpeek(struct jcur *c, char ch)
{
        jspace(c);
        return c->p < c->end && *c->p == ch;
}

static bool jeat(struct jcur *c, char ch)
{
        if (!jpeek(c, ch))
                return false;
        c->p++;
        return true;
}

/* A JSON string into a malloc'd buffer (*ret, *ret_len; NUL-terminated). */
static int jstring(struct jcur *c, char **ret, size_t *ret_len)
{
        struct pbout o = {0};

        if (!jeat(c, '"'))
                return jfail(c, "a string was expected");
        while (c->p < c->end && *c->p != '"') {
                unsigned char ch = (unsigned char)*c->p++;
                if (ch < 0x20) {
                        free(o.buf);
                        return jfail(c, "a control character in a string");
                }
                if (ch != '\\') {
                        out_bytes(&o, &ch, 1);
                        continue;
                }
                if (c->p >= c->end)
                        break;
                char e = *c->p++;
                const char *simple = strchr("\"\\/bfnrt", e);
                if (simple && e) {
                        static const char to[] = "\"\\/\b\f\n\r\t";
                        out_bytes(&o, &to[simple - "\"\\/bfnrt"], 1);
                } else if (e == 'u' && c->end - c->p >= 4) {
                        char hex[5] = {c->p[0], c->p[1], c->p[2], c->p[3], 0}, *hend;
                        unsigned long cp = strtoul(hex, &hend, 16);
                        c->p += 4;
                        if (*hend) {
                                free(o.buf);
                                return jfail(c, "a bad \\u escape");
                        }
                        /* UTF-8 of the code point (a lone surrogate is kept as it is). */
                        uint8_t u[3];
                        size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
                        if (n == 1)
                                u[0] = (uint8_t)cp;
                        else if (n == 2)
                                u[0] = (uint8_t)(0xc0 | cp >> 6),
                                u[1] = (uint8_t)(0x80 | (cp & 0x3f));
                        else
                                u[0] = (uint8_t)(0xe0 | cp >> 12),
                                u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)),
                                u[2] = (uint8_t)(0x80 | (cp & 0x3f));
                        out_bytes(&o, u, n);
                } else {
                        free(o.buf);
                        return jfail(c, "a bad escape in a string");
                }
        }
        if (c->p >= c->end) {
                free(o.buf);
                return jfail(c, "a string does not end");
        }
        c->p++;
        out_bytes(&o, "", 1);
        if (o.oom) {
                free(o.buf);
                return fp_errf(c->err, c->errlen, -ENOMEM, "out of memory");
        }
        *ret = (char *)o.buf;
        *ret_len = o.len - 1;
        return 0;
}

/* Skips any value (bounded in depth). */
static int jskip(struct jcur *c)
{
        char *s;
        size_t n;
        int r;

        jspace(c);
        if (c->p >= c->end)
                return jfail(c, "a value was expected");
        if (*c->p == '"') {
                if ((r = jstring(c, &s, &n)) < 0)
                        return r;
                free(s);
                return 0;
        }
        if (*c->p == '{' || *c->p == '[') {
                char close = *c->p == '{' ? '}' : ']';
                bool obj = *c->p == '{';
                if (++c->depth > JSON_MAX_DEPTH)
                        return jfail(c, "nested too deep");
                c->p++;
                if (!jeat(c, close)) {
                        do {
                                if (obj && ((r = jstring(c, &s, &n)) < 0 || (free(s), 0) ||
                                            (!jeat(c, ':') && (r = jfail(c, "':' expected")))))
                                        return r;
                                if ((r = jskip(c)) < 0)
                                        return r;
                        } while (jeat(c, ','));
                        if (!jeat(c, close))
                                return jfail(c, "',' or the end of a list expected");
                }
                c->depth--;
                return 0;
        }
        /* A number, true, false or null: its characters. */
        const char *start = c->p;
        while (c->p < c->end && strchr("+-.0123456789eEtrufalsn", *c->p) && *c->p)
                c->p++;
        return c->p > start ? 0 : jfail(c, "an unknown value");
}

/* Calls fn(c, key, arg) for each key of an object. */
static int jobject(struct jcur *c, int (*fn)(struct jcur *, const char *, void *), void *arg)
{
        char *key;
        size_t n;
        int r = 0;

        if (!jeat(c, '{'))
                return jfail(c, "an object was expected");
        if (++c->depth > JSON_MAX_DEPTH)
                return jfail(c, "nested too deep");
        if (jeat(c, '}')) {
                c->depth--;
                return 0;
        }
        do {
                if ((r = jstring(c, &key, &n)) < 0)
                        return r;
                r = jeat(c, ':') ? fn(c, key, arg) : jfail(c, "':' expected");
                free(key);
                if (r < 0)
                        return r;
        } while (jeat(c, ','));
        c->depth--;
        return jeat(c, '}') ? 0 : jfail(c, "',' or '}' expected");
}

/* Calls fn(c, arg) for each element of an array (null: none). */
static int jarray(struct jcur *c, int (*fn)(struct jcur *, void *), void *arg)
{
        int r;

        if (jpeek(c, 'n'))
                return jskip(c);
        if (!jeat(c, '['))
                return jfail(c, "a list was expected");
        if (++c->depth > JSON_MAX_DEPTH)
                return jfail(c, "nested too deep");
        if (jeat(c, ']')) {
                c->depth--;
                return 0;
        }
        do {
                if ((r = fn(c, arg)) < 0)
                        return r;
        } while (jeat(c, ','));
        c->depth--;
        return jeat(c, ']') ? 0 : jfail(c, "',' or ']' expected");
}

/* base64 (standard or URL-safe, padded or not) into a malloc'd buffer. */
static int base64_decode(const char *s, size_t n, uint8_t **ret, size_t *ret_len)
{
        size_t padded = (n + 3) / 4 * 4;
        char *t = fp_budget_malloc(padded + 1);
        uint8_t *out = fp_budget_malloc(padded / 4 * 3 + 1);
        int got;

        if (!t || !out) {
                free(t);
                free(out);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
        for (size_t i = n; i < padded; i++)
                t[i] = '=';
        t[padded] = 0;
        got = padded ? EVP_DecodeBlock(out, (unsigned char *)t, (int)padded) : 0;
        for (size_t i = padded; got > 0 && i > 0 && t[i - 1] == '='; i--)
                got--;
        free(t);
        if (got < 0) {
                free(out);
                return -EINVAL;
        }
        *ret = out;
        *ret_len = (size_t)got;
        return 0;
}

/* A JSON number (or a number in a string, as 64-bit integers are) as text, NUL-terminated. */
static int jnumber(struct jcur *c, char *buf, size_t len)
{
        size_t n = 0;
        bool quoted = jeat(c, '"');

        jspace(c);
        while (c->p < c->end && n + 1 < len && *c->p && strchr("+-.0123456789eE", *c->p))
                buf[n++] = *c->p++;
        buf[n] = 0;
        if (n == 0 || (quoted && !jeat(c, '"')))
                return jfail(c, "a number was expected");
        return 0;
}

static int jint(struct jcur *c, uint64_t *ret)
{
        char buf[32], *end;
        int r = jnumber(c, buf, sizeof(buf));

        if (r < 0)
                return r;
        errno = 0;
        if (buf[0] == '-') {
                long long v = strtoll(buf, &end, 10);
                *ret = (uint64_t)v;
        } else {
                *ret = strtoull(buf, &end, 10);
        }
        return errno || *end ? jfail(c, "an integer was expected") : 0;
}

static int jbool(struct jcur *c, uint64_t *ret)
{
        jspace(c);
        if ((size_t)(c->end - c->p) >= 4 && memcmp(c->p, "true", 4) == 0) {
                c->p += 4;
                *ret = 1;
                return 0;
        }
        if ((size_t)(c->end - c->p) >= 5 && memcmp(c->p, "false", 5) == 0) {
                c->p += 5;
                *ret = 0;
                return 0;
        }
        return jfail(c, "true or false was expected");
}

static int jdouble(struct jcur *c, uint64_t *ret)
{
        char buf[64], *end;
        int r = jnumber(c, buf, sizeof(buf));
        double d;

        if (r < 0)
                return r;
        d = strtod(buf, &end);
        if (*end)
                return jfail(c, "a number was expected");
        memcpy(ret, &d, sizeof(d));
        return 0;
}

/* An enum's value: its name (one of f's), or its number. */
static int jenum(struct jcur *c, const struct fp_pbj_field *f, uint64_t *ret)
{
        char *s;
        size_t n;
        int r;

        if (!jpeek(c, '"'))
                return jint(c, ret);
        if ((r = jstring(c, &s, &n)) < 0)
                return r;
        for (size_t i = 0; f->enum_names && f->enum_names[i]; i++)
                if (strcmp(s, f->enum_names[i]) == 0) {
                        free(s);
                        *ret = i;
                        return 0;
                }
        char *end;
        errno = 0;
        *ret = strtoull(s, &end, 10);
        r = errno || !*s || *end ? -EINVAL : 0;
        free(s);
        if (r < 0) {
                char what[96];
                snprintf(what, sizeof(what), "%s is not one of its values", f->json);
                return jfail(c, what);
        }
        return 0;
}

/* A scalar of a kind that is a varint or fixed64. */
static int jscalar(struct jcur *c, const struct fp_pbj_field *f, uint64_t *v)
{
        return f->kind == FP_PBJ_BOOL     ? jbool(c, v)
               : f->kind == FP_PBJ_DOUBLE ? jdouble(c, v)
               : f->kind == FP_PBJ_ENUM   ? jenum(c, f, v)
                                          : jint(c, v);
}

struct jmsg {
        const struct fp_pbj_msg *m;
        struct pbout out;
};

static int jmessage(struct jcur *c, const struct fp_pbj_msg *m, struct pbout *out);

/* One value of field f into o: a message, string or bytes as a LEN field, a scalar as its own. */
static int jvalue(struct jcur *c, const struct fp_pbj_field *f, struct pbout *o)
{
        char *s;
        size_t n;
        uint64_t v;
        int r;

        switch (f->kind) {
        case FP_PBJ_MSG: {
                struct pbout sub = {0};
                if ((r = jmessage(c, f->msg, &sub)) == 0) {
                        out_len(o, f->number, sub.buf, sub.len);
                        o->oom |= sub.oom;
                }
                free(sub.buf);
                return r;
        }
        case FP_PBJ_STRING:
        case FP_PBJ_BYTES:
                if ((r = jstring(c, &s, &n)) < 0)
                        return r;
                if (f->kind == FP_PBJ_BYTES) {
                        uint8_t *raw;
                        size_t raw_len;
                        r = base64_decode(s, n, &raw, &raw_len);
                        free(s);
                        if (r < 0) {
                                char what[96];
                                snprintf(what, sizeof(what), "%s is not base64", f->json);
                                return r == -ENOMEM ? fp_errf(c->err, c->errlen, r, "out of memory")
                                                    : jfail(c, what);
                        }
                        out_len(o, f->number, raw, raw_len);
                        free(raw);
                        return 0;
                }
                out_len(o, f->number, s, n);
                free(s);
                return 0;
        case FP_PBJ_SKIP:
                return jskip(c);
        default:
                if ((r = jscalar(c, f, &v)) < 0)
                        return r;
                if (f->kind == FP_PBJ_FIXED64 || f->kind == FP_PBJ_DOUBLE) {
                        out_fixed64(o, f->number, v);
                } else {
                        out_uint(o, f->number, v);
                }
                return 0;
        }
}

/* A repeated field: messages and strings one field each, scalars packed into one. */
struct jrep {
        const struct fp_pbj_field *f;
        struct pbout *o;
        struct pbout packed;
};

static int jrep_element(struct jcur *c, void *arg)
{
        struct jrep *rp = arg;
        uint64_t v;
        int r;

        if (jpeek(c, 'n'))
                return jskip(c); /* null */
        switch (rp->f->kind) {
        case FP_PBJ_MSG:
        case FP_PBJ_STRING:
        case FP_PBJ_BYTES:
        case FP_PBJ_SKIP:
                return jvalue(c, rp->f, rp->o);
        default:
                if ((r = jscalar(c, rp->f, &v)) < 0)
                        return r;
                if (rp->f->kind == FP_PBJ_FIXED64 || rp->f->kind == FP_PBJ_DOUBLE)
                        out_le64(&rp->packed, v);
                else
                        out_varint(&rp->packed, v);
                return 0;
        }
}

static int jmessage_key(struct jcur *c, const char *key, void *arg)
{
        struct jmsg *jm = arg;
        const struct fp_pbj_field *f = NULL;

        for (size_t i = 0; !f && i < jm->m->n_fields; i++) {
                const struct fp_pbj_field *x = &jm->m->fields[i];
                if (strcmp(key, x->json) == 0 || (x->proto && strcmp(key, x->proto) == 0))
                        f = x;
        }
        if (!f || jpeek(c, 'n'))
                return jskip(c); /* unknown, or null: left out */
        if (!f->repeated)
                return jvalue(c, f, &jm->out);
        struct jrep rp = {.f = f, .o = &jm->out};
        int r = jarray(c, jrep_element, &rp);
        if (r == 0 && rp.packed.len)
                out_len(&jm->out, f->number, rp.packed.buf, rp.packed.len);
        jm->out.oom |= rp.packed.oom;
        free(rp.packed.buf);
        return r;
}

static int jmessage(struct jcur *c, const struct fp_pbj_msg *m, struct pbout *out)
{
        struct jmsg jm = {.m = m};
        int r = jobject(c, jmessage_key, &jm);

        if (r == 0)
                out_bytes(out, jm.out.buf, jm.out.len);
        out->oom |= jm.out.oom;
        free(jm.out.buf);
        return r;
}

int fp_pbjson_read(const uint8_t *body, size_t len, const struct fp_pbj_msg *root, uint8_t **ret,
                   size_t *ret_len, char *err, size_t errlen)
{
        struct jcur c = {(const char *)body, (const char *)body + len, 0, root->name, err, errlen};
        struct pbout o = {0};
        int r = jmessage(&c, root, &o);

        if (r == 0) {
                jspace(&c);
                if (c.p != c.end)
                        r = jfail(&c, "more after the object");
        }
        if (r == 0 && o.oom)
                r = fp_errf(err, errlen, -ENOMEM, "out of memory");
        if (r < 0) {
                free(o.buf);
                return r;
        }
        *ret = o.buf ? o.buf : calloc(1, 1);
        *ret_len = o.len;
        return *ret ? 0 : fp_errf(err, errlen, -ENOMEM, "out of memory");
}

/* ---- binary to JSON ---- */

#define WRITE_MAX_DEPTH 12 /* each a JSON object and an array: within FP_JSON_MAX_DEPTH */

static int wmessage(struct pb m, const struct fp_pbj_msg *t, struct fp_json *j, int depth);

/* One scalar of field f (wire value v) as JSON. */
static void wscalar(const struct fp_pbj_field *f, uint64_t v, struct fp_json *j)
{
        char num[32];
        double d;

        switch (f->kind) {
        case FP_PBJ_BOOL:
                fp_json_bool(j, v != 0);
                return;
        case FP_PBJ_DOUBLE:
                memcpy(&d, &v, sizeof(d));
                fp_json_double(j, d, 6);
                return;
        case FP_PBJ_ENUM:
                for (size_t i = 0; f->enum_names && f->enum_names[i]; i++)
                        if (i == v) {
                                fp_json_string(j, f->enum_names[i]);
                                return;
                        }
                fp_json_int(j, (int64_t)v);
                return;
        case FP_PBJ_INT:
                snprintf(num, sizeof(num), "%" PRId64, (int64_t)v);
                fp_json_string(j, num);
                return;
        default: /* FP_PBJ_UINT, FP_PBJ_FIXED64 */
                snprintf(num, sizeof(num), "%" PRIu64, v);
                fp_json_string(j, num);
                return;
        }
}

static void wbase64(const struct pb *sub, struct fp_json *j)
{
        size_t n = (size_t)(sub->end - sub->p);
        char *out = fp_budget_malloc(4 * ((n + 2) / 3) + 1);

        if (!out) {
                fp_json_string(j, "");
                return;
        }
        EVP_EncodeBlock((unsigned char *)out, sub->p, (int)n);
        fp_json_string(j, out);
        free(out);
}

/* One occurrence of field f: wire type wt, value v or bytes sub. */
static int wvalue(const struct fp_pbj_field *f, unsigned wt, uint64_t v, struct pb sub,
                  struct fp_json *j, int depth)
{
        switch (f->kind) {
        case FP_PBJ_MSG:
                return wt == WT_LEN ? wmessage(sub, f->msg, j, depth + 1) : -EBADMSG;
        case FP_PBJ_STRING:
                if (wt != WT_LEN)
                        return -EBADMSG;
                {
                        size_t n = (size_t)(sub.end - sub.p);
                        char *s = fp_budget_malloc(n + 1);
                        if (!s)
                                return -ENOMEM;
                        memcpy(s, sub.p, n);
                        s[n] = 0;
                        fp_json_string(j, s); /* escaped and made valid UTF-8 */
                        free(s);
                }
                return 0;
        case FP_PBJ_BYTES:
                if (wt != WT_LEN)
                        return -EBADMSG;
                wbase64(&sub, j);
                return 0;
        default:
                if (wt == WT_LEN) {
                        if (!f->repeated)
                                return -EBADMSG;
                        /* Packed: each element of sub. */
                        bool fixed = f->kind == FP_PBJ_FIXED64 || f->kind == FP_PBJ_DOUBLE;
                        while (sub.p < sub.end) {
                                uint64_t e = 0;
                                if (fixed) {
                                        if (sub.end - sub.p < 8)
                                                return -EBADMSG;
                                        for (int k = 7; k >= 0; k--)
                                                e = e << 8 | sub.p[k];
                                        sub.p += 8;
                                } else if (pb_varint(&sub, &e) < 0) {
                                        return -EBADMSG;
                                }
                                wscalar(f, e, j);
                        }
                        return 0;
                }
                wscalar(f, v, j);
                return 0;
        }
}

static int wmessage(struct pb m, const struct fp_pbj_msg *t, struct fp_json *j, int depth)
{
        if (depth > WRITE_MAX_DEPTH)
                return -EBADMSG;
        fp_json_begin_object(j);
        for (size_t i = 0; i < t->n_fields; i++) {
                const struct fp_pbj_field *f = &t->fields[i];
                struct pb c = m, sub = {0}, last_sub = {0};
                uint32_t num;
                unsigned wt, last_wt = 0;
                uint64_t v, last_v = 0;
                bool any = false;
                int r;

                if (f->kind == FP_PBJ_SKIP)
                        continue;
                while (c.p < c.end) {
                        if (pb_field(&c, &num, &wt, &v, &sub) < 0)
                                return -EBADMSG;
                        if (num != f->number)
                                continue;
                        if (!f->repeated) {
                                /* The last one counts (as a decoder merges them). */
                                last_wt = wt;
                                last_v = v;
                                last_sub = sub;
                                any = true;
                                continue;
                        }
                        if (!any) {
                                fp_json_key(j, f->json);
                                fp_json_begin_array(j);
                                any = true;
                        }
                        if ((r = wvalue(f, wt, v, sub, j, depth)) < 0)
                                return r;
                }
                if (any && f->repeated) {
                        fp_json_end_array(j);
                } else if (any) {
                        fp_json_key(j, f->json);
                        if ((r = wvalue(f, last_wt, last_v, last_sub, j, depth)) < 0)
                                return r;
                }
        }
        fp_json_end_object(j);
        return 0;
}

int fp_pbjson_write(const uint8_t *buf, size_t len, const struct fp_pbj_msg *root, fp_write_fn w,
                    void *ctx)
{
        struct fp_json j;

        fp_json_init(&j, w, ctx);
        return wmessage((struct pb){buf, buf + len}, root, &j, 0);
}
