/* SPDX-License-Identifier: MIT */
/*
 * The collector's settings table; see settings.h. Adding a setting is one
 * row here and one field in struct fp_coll_config.
 */
#include "settings.h"
#include "util.h"
#include "clickhouse.h"

#include <errno.h>

const struct fp_conf_key fp_coll_settings[] = {
    {"listen", FP_CONF_STRING, "127.0.0.1:7070", 0, 0, "ADDR:PORT",
     "address and port to serve HTTP (or HTTPS) on"},
    {"store", FP_CONF_STRING, "/var/lib/fleetprof-collector/collector.db", 0, 0, "PATH|URL",
     "the SQLite file, or clickhouse://HOST:PORT/DATABASE, of every host's profiles"},
    {"store-credentials", FP_CONF_STRING, NULL, 0, 0, "FILE",
     "ClickHouse user and password: USER:PASSWORD on FILE's first line"},
    {"token-file", FP_CONF_STRING, NULL, 0, 0, "FILE",
     "agents must send the bearer token on FILE's first line"},
    {"read-token-file", FP_CONF_STRING, NULL, 0, 0, "FILE",
     "every read needs the bearer token on FILE's first line"},
    {"tls-cert", FP_CONF_STRING, NULL, 0, 0, "FILE",
     "serve HTTPS with this PEM certificate (chain) and --tls-key"},
    {"tls-key", FP_CONF_STRING, NULL, 0, 0, "FILE", "the PEM private key of --tls-cert"},
    {"max-body-mb", FP_CONF_UINT, "16", 1, 1024, "N",
     "largest upload body accepted (413 beyond, before it is read)"},
    {"max-profile-mb", FP_CONF_UINT, "64", 1, 4096, "N",
     "largest decompressed profile accepted (413 beyond)"},
    {"max-queue-mb", FP_CONF_UINT, "256", 1, 65536, "N",
     "bytes of upload bodies waiting to be decoded and stored (503 beyond)"},
    {"max-read-ms", FP_CONF_UINT, "10000", 1, 3600000, "MS",
     "a read (API, page, pprof) that runs longer is stopped and answered 503"},
    {"max-read-mb", FP_CONF_UINT, "512", 16, 65536, "N",
     "memory one read may allocate; past it the read is stopped and answered 503"},
    {"max-connections", FP_CONF_UINT, "4096", 1, 65536, "N",
     "connections served at once; past it the idlest anonymous one is shed (503 when none)"},
    {"max-connections-per-ip", FP_CONF_UINT, "128", 1, 65536, "N",
     "connections served at once from one address (429 beyond)"},
    {"store-max-mb", FP_CONF_UINT, "1024", 1, 1048576, "N",
     "byte budget of the store; the oldest uploads go first"},
    {"no-summaries", FP_CONF_BOOL, "false", 0, 0, NULL,
     "neither make nor read summaries of whole hours and days: every read takes the raw rows"},
    {"retention", FP_CONF_DURATION, "0", 0, 100ULL * 366 * 86400, "DURATION",
     "delete uploads older than this (7d, 12h; 0: keep until evicted)"},
    {"debuginfod", FP_CONF_LIST, NULL, 0, 0, "URL",
     "name stripped frames from this debuginfod server (default: $DEBUGINFOD_URLS; none: off)"},
    {"debuginfod-cache", FP_CONF_STRING, "/var/cache/fleetprof-collector/debuginfod", 0, 0, "DIR",
     "where fetched debug files are kept (the collector's alone; made 0700 when missing)"},
    {"debuginfod-cache-mb", FP_CONF_UINT, "2048", 1, 1048576, "N",
     "byte budget of the debug file cache; the least recently used build goes first"},
    {"debuginfod-timeout", FP_CONF_DURATION, "60", 1, 3600, "DURATION",
     "one request to a debuginfod server, connection to last byte"},
    {"debuginfod-retry", FP_CONF_DURATION, "10m", 1, 7 * 86400, "DURATION",
     "a build no server gave is asked for again after this"},
    {"debuginfo-mb", FP_CONF_UINT, "4096", 0, 1048576, "N",
     "byte budget of uploaded debug files (POST /buildid/ID/debuginfo), kept beside the store; "
     "the least recently used go first; 0: uploads refused"},
};
const size_t fp_coll_n_settings = sizeof(fp_coll_settings) / sizeof(fp_coll_settings[0]);

void fp_coll_config_from(const struct fp_conf *conf, struct fp_coll_config *c)
{
        *c = (struct fp_coll_config){
            .listen = fp_conf_string(conf, "listen"),
            .store = fp_conf_string(conf, "store"),
            .store_credentials = fp_conf_path(conf, "store-credentials"),
            .token_file = fp_conf_path(conf, "token-file"),
            .read_token_file = fp_conf_path(conf, "read-token-file"),
            .tls_cert = fp_conf_path(conf, "tls-cert"),
            .tls_key = fp_conf_path(conf, "tls-key"),
            .max_body_mb = fp_conf_uint(conf, "max-body-mb"),
            .max_profile_mb = fp_conf_uint(conf, "max-profile-mb"),
            .max_queue_mb = fp_conf_uint(conf, "max-queue-mb"),
            .max_read_ms = fp_conf_uint(conf, "max-read-ms"),
            .max_read_mb = fp_conf_uint(conf, "max-read-mb"),
            .max_connections = (unsigned)fp_conf_uint(conf, "max-connections"),
            .max_connections_per_ip = (unsigned)fp_conf_uint(conf, "max-connections-per-ip"),
            .store_max_mb = fp_conf_uint(conf, "store-max-mb"),
            .retention_s = fp_conf_duration(conf, "retention"),
            .summaries = !fp_conf_bool(conf, "no-summaries"),
            .debuginfod_cache = fp_conf_string(conf, "debuginfod-cache"),
            .debuginfod_cache_mb = fp_conf_uint(conf, "debuginfod-cache-mb"),
            .debuginfod_timeout_s = fp_conf_duration(conf, "debuginfod-timeout"),
            .debuginfod_retry_s = fp_conf_duration(conf, "debuginfod-retry"),
            .debuginfo_mb = fp_conf_uint(conf, "debuginfo-mb"),
        };
        c->debuginfod = fp_conf_list(conf, "debuginfod", &c->n_debuginfod);
}

int fp_coll_settings_check(const struct fp_conf *conf, char *err, size_t err_len)
{
        struct fp_coll_config c;

        fp_coll_config_from(conf, &c);
        if (!c.listen)
                return fp_errf(err, err_len, -EINVAL, "--listen ADDR:PORT is required");
        if (!c.store)
                return fp_errf(err, err_len, -EINVAL, "--store PATH is required");
        if (c.store_credentials && !fp_ch_is_url(c.store))
                return fp_errf(err, err_len, -EINVAL,
                               "--store-credentials applies to a clickhouse:// store only");
        if (!!c.tls_cert != !!c.tls_key)
                return fp_errf(err, err_len, -EINVAL,
                               "HTTPS needs both --tls-cert and --tls-key (only --%s was given)",
                               c.tls_cert ? "tls-cert" : "tls-key");
        return 0;
}
