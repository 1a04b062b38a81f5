/* SPDX-License-Identifier: MIT */
/*
 * The collector's settings: one table (fp_coll_settings[]) names every
 * setting with its type, default, bounds and help line. The common
 * parser (common/conf.h) drives the command line, the configuration file,
 * --help and --check-config from it; fp_coll_config_from() then copies
 * the values into the plain struct the server is started with.
 */
#pragma once

#include "conf.h"

#include <stdint.h>

struct fp_coll_config {
        const char *listen;            /* ADDR:PORT */
        const char *store;             /* SQLite file or clickhouse:// URL */
        const char *store_credentials; /* ClickHouse USER:PASSWORD file, NULL: default user */
        const char *token_file;        /* NULL: no authentication of uploads */
        const char *read_token_file;   /* NULL: reads are open */
        const char *tls_cert, *tls_key;
        uint64_t max_body_mb;    /* compressed upload size */
        uint64_t max_profile_mb; /* decompressed upload size */
        uint64_t max_queue_mb;   /* bodies waiting to be decoded and stored */
        uint64_t max_read_ms;    /* one read's time budget */
        uint64_t max_read_mb;    /* one read's memory budget */
        unsigned max_connections, max_connections_per_ip;
        uint64_t store_max_mb;
        uint64_t retention_s; /* 0: keep until the byte budget evicts */
        bool summaries;       /* summaries kept and read (off: every read from the raw rows) */
        /* debuginfod servers as given (none: $DEBUGINFOD_URLS; "none": off) */
        const char *const *debuginfod;
        size_t n_debuginfod;
        const char *debuginfod_cache;
        uint64_t debuginfod_cache_mb, debuginfod_timeout_s, debuginfod_retry_s;
        uint64_t debuginfo_mb; /* uploaded debug files' budget; 0: uploads refused */
};

extern const struct fp_conf_key fp_coll_settings[];
extern const size_t fp_coll_n_settings;

/*
 * Fills c from conf (strings point into conf, which must outlive c):
 * "none" or an empty value clears a file setting.
 */
void fp_coll_config_from(const struct fp_conf *conf, struct fp_coll_config *c);
/* Checks the settings against each other (TLS needs both files). 0 or -EINVAL with err. */
int fp_coll_settings_check(const struct fp_conf *conf, char *err, size_t err_len);
