/* SPDX-License-Identifier: MIT */
/*
 * The streaming JSON writer; see json.h.
 */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fp_json_init(struct fp_json *j, fp_write_fn write, void *ctx)
{
        memset(j, 0, sizeof(*j));
        j->write = write;
        j->ctx = ctx;
        j->first[0] = true;
}

/* The separator a new value or key needs at this point. */
static void sep(struct fp_json *j)
{
        if (j->after_key) {
                j->after_key = false;
                return;
        }
        if (!j->first[j->depth])
                j->write(j->ctx, ",", 1);
        j->first[j->depth] = false;
}

static void open_level(struct fp_json *j, const char *c)
{
        sep(j);
        if (j->depth + 1 >= FP_JSON_MAX_DEPTH)
                abort();
        j->write(j->ctx, c, 1);
        j->first[++j->depth] = true;
}

static void close_level(struct fp_json *j, const char *c)
{
        if (j->depth == 0)
                abort();
        j->depth--;
        j->write(j->ctx, c, 1);
}

void fp_json_begin_object(struct fp_json *j)
{
        open_level(j, "{");
}

void fp_json_end_object(struct fp_json *j)
{
        close_level(j, "}");
}

void fp_json_begin_array(struct fp_json *j)
{
        open_level(j, "[");
}

void fp_json_end_array(struct fp_json *j)
{
        close_level(j, "]");
}

void fp_json_key(struct fp_json *j, const char *key)
{
        sep(j);
        fp_escape_json(j->write, j->ctx, key);
        j->write(j->ctx, ":", 1);
        j->after_key = true;
}

void fp_json_string(struct fp_json *j, const char *s)
{
        sep(j);
        fp_escape_json(j->write, j->ctx, s);
}

static void raw(struct fp_json *j, const char *text)
{
        sep(j);
        j->write(j->ctx, text, strlen(text));
}

void fp_json_int(struct fp_json *j, int64_t v)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRId64, v);
        raw(j, buf);
}

void fp_json_uint(struct fp_json *j, uint64_t v)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
        raw(j, buf);
}

void fp_json_double(struct fp_json *j, double v, int decimals)
{
        char buf[64];
        if (!isfinite(v)) {
                raw(j, "null");
                return;
        }
        snprintf(buf, sizeof(buf), "%.*f", decimals, v);
        raw(j, buf);
}

void fp_json_bool(struct fp_json *j, bool v)
{
        raw(j, v ? "true" : "false");
}

void fp_json_null(struct fp_json *j)
{
        raw(j, "null");
}
