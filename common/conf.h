/* SPDX-License-Identifier: MIT */
/*
 * Configuration files and the flags that override them, for every
 * fleetprof program (fp_conf).
 *
 * Each program defines ONE table of its settings (struct fp_conf_key[]):
 * name, type, default, bounds, the placeholder shown in --help and a line
 * of help. The same table drives the configuration file, the long options
 * (a key "store-max-mb" is the flag --store-max-mb) and --check-config,
 * so a setting cannot exist in one place and not the other.
 *
 * The file format is one setting a line:
 *
 *     # a comment (only whole lines; '#' inside a value is kept)
 *     key = value
 *     key = "value with  spaces kept"
 *     key =            (empty: the setting is unset, e.g. no collector)
 *
 * Blank lines are skipped. A list key (FP_CONF_LIST) may be given on many
 * lines, each adding one value. Every error stops the parse at that line: an
 * unknown key, a line without '=', another key set twice in the file, a number
 * that is not a number or lies outside its bounds, a bad boolean. The
 * error text is one line, "FILE:LINE: what", ready to print.
 *
 * Precedence: a value from the command line always wins over the file (a
 * list given on the command line replaces the file's whole list),
 * whatever the order in which they are applied (the program reads argv
 * first to learn --config, then the file); the file wins over the
 * table's default.
 */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum fp_conf_type {
        FP_CONF_STRING,
        FP_CONF_UINT,     /* unsigned decimal within [min, max] */
        FP_CONF_BOOL,     /* true/false, yes/no, on/off, 1/0 */
        FP_CONF_DURATION, /* N, Ns, Nm, Nh or Nd, held in seconds within [min, max] */
        FP_CONF_LIST,     /* strings; the key may be given many times, each adds one */
};

enum fp_conf_source {
        FP_CONF_DEFAULT,
        FP_CONF_FILE,
        FP_CONF_ARGS,
};

struct fp_conf_key {
        const char *name; /* the key and, with "--", the long option */
        enum fp_conf_type type;
        const char *def; /* default as text; NULL: unset */
        unsigned long long min, max;
        const char *arg;  /* placeholder in --help ("PATH"); NULL for booleans */
        const char *help; /* one line */
};

struct fp_conf;

/* Getopt values of the table's keys are FP_CONF_OPT_BASE + index. */
#define FP_CONF_OPT_BASE 0x1000

/*
 * Creates a configuration holding the table's defaults. The table must
 * outlive the result and its defaults must be valid (checked: -EINVAL).
 */
int fp_conf_new(const struct fp_conf_key *keys, size_t n_keys, struct fp_conf **ret);
/*
 * A check of a string or list key's values beyond their type, run on
 * each value set from now on: 0, or -errno with one line in err, which
 * is prefixed with the setting (and its place in the file).
 */
typedef int (*fp_conf_check_fn)(const char *value, char *err, size_t err_len);
int fp_conf_set_check(struct fp_conf *c, const char *key, fp_conf_check_fn check);
/* Frees the configuration and every string it holds. Accepts NULL. */
void fp_conf_free(struct fp_conf *c);
/* For __attribute__((cleanup)). */
static inline void fp_conf_freep(struct fp_conf **c)
{
        fp_conf_free(*c);
}

/*
 * Sets key to the text value from source. A FP_CONF_FILE value does not
 * replace a FP_CONF_ARGS one (and succeeds). Returns -ENOENT for an
 * unknown key, -EINVAL for a value of the wrong form, -ERANGE for a
 * number outside the bounds, -ENOMEM; err gets one line without a
 * location ("bucket = 0: out of range, 1 to 3600").
 */
int fp_conf_set(struct fp_conf *c, const char *key, const char *value, enum fp_conf_source source,
                char *err, size_t err_len);

/*
 * A setting read from a file: key and value as written (value unquoted,
 * "" when empty). Returns 0 or -errno with one line in err (no location:
 * the parser adds "PATH:LINE: ").
 */
typedef int (*fp_conf_setting_fn)(const char *key, const char *value, void *userdata, char *err,
                                  size_t err_len);
/*
 * The file format alone, for a program that keeps its settings in a
 * table of its own: reads path (see the format above) and calls fn for
 * each setting in order. Refuses on its own a malformed line, an
 * unbalanced quote and a key set twice. Stops at the first error: returns
 * its -errno, stores its line in *ret_line (0 when the file could not be
 * read) and writes "PATH:LINE: what" (or "PATH: reason") into err.
 */
int fp_conf_parse(const char *path, fp_conf_setting_fn fn, void *userdata, unsigned *ret_line,
                  char *err, size_t err_len);

/*
 * Reads the file at path (see the format above) with source FP_CONF_FILE.
 * Stops at the first bad line: returns its -errno, stores its number in
 * *ret_line (0 when the file itself could not be read) and writes
 * "PATH:LINE: what" (or "PATH: reason") into err.
 */
int fp_conf_load(struct fp_conf *c, const char *path, unsigned *ret_line, char *err,
                 size_t err_len);

/*
 * Fills opts (which must have room for n_keys + n_extra + 1 entries) with
 * the program's own options (extra) followed by one long option per key,
 * val FP_CONF_OPT_BASE + index, and the terminating zero entry. Boolean
 * keys take an optional argument (--key or --key=false).
 */
void fp_conf_getopt_table(const struct fp_conf *c, const struct option *extra, size_t n_extra,
                          struct option *opts);
/* Applies the option getopt returned as val (FP_CONF_OPT_BASE + index) with optarg. */
int fp_conf_set_option(struct fp_conf *c, int val, const char *optarg, char *err, size_t err_len);

/*
 * Typed access by key name. The name must be in the table with that
 * type: anything else is a programming error and aborts. fp_conf_string
 * returns NULL for an unset string.
 */
const char *fp_conf_string(const struct fp_conf *c, const char *key);
unsigned long long fp_conf_uint(const struct fp_conf *c, const char *key);
bool fp_conf_bool(const struct fp_conf *c, const char *key);
uint64_t fp_conf_duration(const struct fp_conf *c, const char *key);
/* The values of a list key, in the order given; *ret_n of them. */
const char *const *fp_conf_list(const struct fp_conf *c, const char *key, size_t *ret_n);
/* A string key that names a file: NULL when unset or "none". */
const char *fp_conf_path(const struct fp_conf *c, const char *key);
/* Where the key's current value came from. */
enum fp_conf_source fp_conf_source_of(const struct fp_conf *c, const char *key);

/*
 * Prints one help line per key ("  --key ARG   help (default D)"), the
 * options part of a program's --help.
 */
void fp_conf_print_help(const struct fp_conf *c, FILE *f);

/* A flag of a program's own that takes no value (--foreground). */
struct fp_conf_flag {
        const char *name;
        bool *set;
};

/*
 * What fp_conf_configure() needs to know of a program beyond its table:
 * its name and version (--version), the head of its --help (usage prints
 * the synopsis and the lines of its own flags; the table's keys,
 * --version and --help follow), the default settings file (optional
 * unless --check-config), its flags, and a check of the settings against
 * each other (NULL: none).
 */
struct fp_conf_program {
        const char *name, *version, *default_config;
        void (*usage)(FILE *f, const struct fp_conf *c);
        const struct fp_conf_flag *flags;
        size_t n_flags;
        int (*check)(const struct fp_conf *c, char *err, size_t err_len);
};

/*
 * The whole command line of a program: --config FILE, --check-config,
 * --version, --help, the program's flags and one --KEY VALUE per table
 * key, then the settings file, which never overrides the command line.
 * Errors are logged as one line (fp_log). Returns -1 to go on, or the
 * exit status: 0 after --help, --version or a good --check-config, 1 for
 * a bad file, 2 for a bad command line or settings that do not fit
 * together.
 */
int fp_conf_configure(struct fp_conf *c, const struct fp_conf_program *p, int argc, char **argv);
