/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the query API's label selectors
 * (collector/read/selector.h), which anyone allowed to read sends: the
 * input, as a string, is parsed as a selector, and one that parses is
 * matched against labels that are the input's own bytes. None may crash,
 * leak or read out of bounds, and a selector that parses holds at most
 * FP_SEL_MAX_MATCHERS matchers with names within their bound.
 */
#include "selector.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every label's value is the whole input: the worst a match may be given. */
static const char *value_of(void *ctx, const char *name)
{
        (void)name;
        return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fp_selector *s = malloc(sizeof(*s));
        char *text = malloc(size + 1), err[256];

        if (s && text) {
                memcpy(text, data, size);
                text[size] = 0;
                if (fp_sel_parse(text, s, err, sizeof(err)) == 0) {
                        if (s->n > FP_SEL_MAX_MATCHERS)
                                abort();
                        for (size_t i = 0; i < s->n; i++)
                                if (strlen(s->m[i].name) > FP_SEL_MAX_NAME || !s->m[i].value)
                                        abort();
                        (void)fp_sel_match(s, value_of, text);
                        (void)fp_sel_equal(s, "service_name");
                        fp_sel_free(s);
                } else if (!err[0] || strchr(err, '\n')) {
                        abort(); /* a refusal is one line */
                }
        }
        free(text);
        free(s);
        return 0;
}
