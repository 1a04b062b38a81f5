/* SPDX-License-Identifier: MIT */
/*
 * The collector's settings: one table (options.c, fp_coll_options[])
 * names every setting with its kind, default, bounds and help text. The
 * command line, --help and (later) a configuration file are all driven
 * from it: fp_coll_config_set() takes a setting by name and its value as
 * text, exactly as a "name = value" line of a file would give them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fp_coll_config {
        char *listen;     /* ADDR:PORT */
        char *store;      /* SQLite file */
        char *token_file; /* NULL: no authentication */
        char *tls_cert, *tls_key;
        uint64_t max_body_mb;    /* compressed upload size */
        uint64_t max_profile_mb; /* decompressed upload size */
        uint64_t store_max_mb;
        uint64_t retention_s; /* 0: keep until the byte budget evicts */
};

enum fp_coll_option_kind {
        FP_COLL_OPT_STRING,   /* a path or an address; "" or "none" clears it */
        FP_COLL_OPT_UINT,     /* a decimal integer in [min, max] */
        FP_COLL_OPT_DURATION, /* N[s|m|h|d] in seconds, in [min, max]; 0: off */
};

struct fp_coll_option {
        const char *name;    /* command line --name, config file name */
        const char *metavar; /* for --help */
        enum fp_coll_option_kind kind;
        size_t offset;     /* into struct fp_coll_config */
        const char *def;   /* default as text, NULL: unset */
        uint64_t min, max; /* bounds of UINT and DURATION */
        const char *help;
};

extern const struct fp_coll_option fp_coll_options[];
extern const size_t fp_coll_n_options;

/* Fills c with the table's defaults. 0 or -ENOMEM. */
int fp_coll_config_init(struct fp_coll_config *c);
void fp_coll_config_free(struct fp_coll_config *c);

/*
 * Sets the setting name from its text value, checking kind and bounds.
 * 0, -ENOENT (no such setting), -EINVAL (bad value) or -ENOMEM, with one
 * line in err.
 */
int fp_coll_config_set(struct fp_coll_config *c, const char *name, const char *value, char *err,
                       size_t errlen);

/* Checks settings against each other (TLS needs both files). 0 or -EINVAL with err. */
int fp_coll_config_check(const struct fp_coll_config *c, char *err, size_t errlen);

/* Prints --help, generated from the table. */
void fp_coll_config_usage(FILE *f);

/* "7d", "12h", "90m", "30s" or plain seconds into seconds. 0 or -EINVAL. */
int fp_coll_parse_duration(const char *s, uint64_t *ret);
