/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the configuration file format (common/conf.h),
 * which the agent reads as root: the input is a whole file, read through
 * a memfd by fp_conf_load() into the collector's settings table plus a
 * repeatable list key whose lines are checked as the agent checks its
 * target lines (fp_rule_check_words()), and by fp_conf_parse() alone.
 * Neither may crash, leak, read out of bounds or accept a value outside
 * its key's bounds.
 */
#include "conf.h"
#include "rule.h"
#include "settings.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check_target(const char *value, char *err, size_t err_len)
{
        return fp_rule_check_words(value, err, err_len);
}

static int count(const char *key, const char *value, void *userdata, char *err, size_t err_len)
{
        (void)err;
        (void)err_len;
        if (!key[0] || strchr(key, '\n') || strchr(value, '\n'))
                abort(); /* the parser hands over one line's key and value */
        (*(unsigned *)userdata)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct fp_conf_key keys[64];
        struct fp_conf *c = NULL;
        char path[64], err[1024];
        unsigned line = 0, n = 0;
        int fd = memfd_create("fuzz-config", MFD_CLOEXEC);

        if (fd < 0 || fp_coll_n_settings + 1 > sizeof(keys) / sizeof(keys[0]))
                abort();
        if (size && write(fd, data, size) != (ssize_t)size)
                abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        memcpy(keys, fp_coll_settings, fp_coll_n_settings * sizeof(keys[0]));
        keys[fp_coll_n_settings] =
            (struct fp_conf_key){"target", FP_CONF_LIST, NULL, 0, 0, "RULE", "a rule (repeatable)"};
        if (fp_conf_new(keys, fp_coll_n_settings + 1, &c) == 0 &&
            fp_conf_set_check(c, "target", check_target) == 0 &&
            fp_conf_load(c, path, &line, err, sizeof(err)) == 0) {
                for (size_t i = 0; i < fp_coll_n_settings; i++) {
                        const struct fp_conf_key *k = &fp_coll_settings[i];
                        if (k->type == FP_CONF_UINT) {
                                uint64_t v = fp_conf_uint(c, k->name);
                                if (v < k->min || v > k->max)
                                        abort();
                        }
                }
                (void)fp_coll_settings_check(c, err, sizeof(err));
        }
        fp_conf_free(c);
        (void)fp_conf_parse(path, count, &n, &line, err, sizeof(err));
        close(fd);
        return 0;
}
