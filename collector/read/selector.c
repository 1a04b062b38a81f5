/* SPDX-License-Identifier: MIT */
/*
 * Label selectors; see selector.h.
 */
#include "selector.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cur {
        const char *p;
        char *err;
        size_t errlen;
};

static void space(struct cur *c)
{
        while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')
                c->p++;
}

static bool name_start(char ch)
{
        return isalpha((unsigned char)ch) || ch == '_';
}

static bool name_char(char ch)
{
        return isalnum((unsigned char)ch) || ch == '_' || ch == '.';
}

/* A quoted value into *ret (malloc'd). */
static int quoted(struct cur *c, char **ret)
{
        char q = *c->p;
        size_t n = 0;
        char *v;

        if (q != '"' && q != '\'' && q != '`')
                return fp_errf(c->err, c->errlen, -EINVAL, "a quoted value was expected at '%.20s'",
                               c->p);
        c->p++;
        /* At most as long as what is left of the text. */
        if (!(v = malloc(strlen(c->p) + 1)))
                return fp_errf(c->err, c->errlen, -ENOMEM, "out of memory");
        for (;;) {
                char ch = *c->p++;
                if (!ch) {
                        free(v);
                        return fp_errf(c->err, c->errlen, -EINVAL, "a value's quote is not closed");
                }
                if (ch == q)
                        break;
                if (ch == '\\' && q != '`') {
                        char e = *c->p++;
                        switch (e) {
                        case '\\':
                        case '"':
                        case '\'':
                                ch = e;
                                break;
                        case 'n':
                                ch = '\n';
                                break;
                        case 't':
                                ch = '\t';
                                break;
                        case 'r':
                                ch = '\r';
                                break;
                        default:
                                free(v);
                                return fp_errf(c->err, c->errlen, -EINVAL,
                                               "unknown escape '\\%c' in a value", e ? e : '0');
                        }
                }
                v[n++] = ch;
        }
        v[n] = 0;
        *ret = v;
        return 0;
}

static int matcher(struct cur *c, struct fp_sel_matcher *m)
{
        size_t n = 0;
        int r;

        if (!name_start(*c->p))
                return fp_errf(c->err, c->errlen, -EINVAL, "a label name was expected at '%.20s'",
                               c->p);
        while (name_char(c->p[n]))
                n++;
        if (n > FP_SEL_MAX_NAME)
                return fp_errf(c->err, c->errlen, -EINVAL, "a label name is longer than %d bytes",
                               FP_SEL_MAX_NAME);
        memcpy(m->name, c->p, n);
        m->name[n] = 0;
        c->p += n;
        space(c);
        if (c->p[0] == '=' && c->p[1] == '~') {
                m->op = FP_SEL_RE;
                c->p += 2;
        } else if (c->p[0] == '!' && c->p[1] == '~') {
                m->op = FP_SEL_NRE;
                c->p += 2;
        } else if (c->p[0] == '!' && c->p[1] == '=') {
                m->op = FP_SEL_NE;
                c->p += 2;
        } else if (c->p[0] == '=') {
                m->op = FP_SEL_EQ;
                c->p += 1;
        } else {
                return fp_errf(c->err, c->errlen, -EINVAL,
                               "label '%s' needs =, !=, =~ or !~ at '%.20s'", m->name, c->p);
        }
        space(c);
        if ((r = quoted(c, &m->value)) < 0)
                return r;
        if (m->op == FP_SEL_RE || m->op == FP_SEL_NRE) {
                char why[160];
                if (strlen(m->value) > FP_SEL_MAX_REGEX)
                        r = fp_errf(c->err, c->errlen, -EINVAL,
                                    "the regular expression of '%s' is longer than %d bytes",
                                    m->name, FP_SEL_MAX_REGEX);
                else if ((r = fp_linre_new(m->value, FP_SEL_REGEX_MEM, &m->re, why, sizeof(why))) ==
                         -ENOMEM)
                        r = fp_errf(c->err, c->errlen, -ENOMEM, "out of memory");
                else if (r < 0)
                        r = fp_errf(c->err, c->errlen, -EINVAL,
                                    "the regular expression of '%s' is invalid: %s", m->name, why);
                if (r < 0) {
                        free(m->value);
                        m->value = NULL;
                        return r;
                }
        }
        return 0;
}

int fp_sel_parse(const char *text, struct fp_selector *ret, char *err, size_t errlen)
{
        struct cur c = {.p = text ? text : "", .err = err, .errlen = errlen};
        int r = 0;

        memset(ret, 0, sizeof(*ret));
        if (strlen(c.p) > FP_SEL_MAX_TEXT)
                return fp_errf(err, errlen, -EINVAL, "the label selector is longer than %d bytes",
                               FP_SEL_MAX_TEXT);
        space(&c);
        if (!*c.p)
                return 0;
        if (*c.p != '{')
                return fp_errf(err, errlen, -EINVAL,
                               "a label selector starts with '{' (as {service_name=\"api\"})");
        c.p++;
        space(&c);
        while (*c.p != '}') {
                if (ret->n == FP_SEL_MAX_MATCHERS) {
                        r = fp_errf(err, errlen, -EINVAL,
                                    "a label selector has more than %d matchers",
                                    FP_SEL_MAX_MATCHERS);
                        break;
                }
                if ((r = matcher(&c, &ret->m[ret->n])) < 0)
                        break;
                ret->n++;
                space(&c);
                if (*c.p == ',') {
                        c.p++;
                        space(&c);
                } else if (*c.p != '}') {
                        r = fp_errf(err, errlen, -EINVAL, "',' or '}' was expected at '%.20s'",
                                    c.p);
                        break;
                }
        }
        if (r == 0) {
                c.p++;
                space(&c);
                if (*c.p)
                        r = fp_errf(err, errlen, -EINVAL, "text after the label selector's '}'");
        }
        if (r < 0) {
                fp_sel_free(ret);
                /* The reason quotes the selector: one line, whatever the selector held. */
                for (char *e = err; e && *e; e++)
                        if ((unsigned char)*e < 0x20 || *e == 0x7f)
                                *e = '?';
        }
        return r;
}

void fp_sel_free(struct fp_selector *s)
{
        for (size_t i = 0; i < s->n; i++) {
                fp_linre_free(s->m[i].re);
                s->m[i].re = NULL;
                free(s->m[i].value);
        }
        s->n = 0;
}

bool fp_sel_match(const struct fp_selector *s, fp_sel_label_fn fn, void *ctx)
{
        for (size_t i = 0; i < s->n; i++) {
                const struct fp_sel_matcher *m = &s->m[i];
                const char *v = fn(ctx, m->name);
                bool ok;
                if (!v)
                        v = "";
                switch (m->op) {
                case FP_SEL_EQ:
                        ok = strcmp(v, m->value) == 0;
                        break;
                case FP_SEL_NE:
                        ok = strcmp(v, m->value) != 0;
                        break;
                case FP_SEL_RE:
                        ok = fp_linre_match(m->re, v, strlen(v));
                        break;
                default:
                        ok = !fp_linre_match(m->re, v, strlen(v));
                        break;
                }
                if (!ok)
                        return false;
        }
        return true;
}

const char *fp_sel_equal(const struct fp_selector *s, const char *name)
{
        for (size_t i = 0; i < s->n; i++)
                if (s->m[i].op == FP_SEL_EQ && strcmp(s->m[i].name, name) == 0)
                        return s->m[i].value;
        return NULL;
}
