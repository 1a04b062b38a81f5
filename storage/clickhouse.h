/* SPDX-License-Identifier: MIT */
/*
 * The collector's store on ClickHouse: the same writes and reads as the
 * SQLite store's collector side (store.h), kept in a ClickHouse database
 * reached over its HTTP interface with libcurl, so that any number of
 * stateless collectors can serve one shared (and, on a cluster,
 * replicated) store. clickhouse.c documents the schema.
 *
 *   clickhouse://HOST[:PORT]/DATABASE     HTTP (port 8123 by default)
 *   clickhouses://HOST[:PORT]/DATABASE    HTTPS (port 8443), the system's CAs
 *
 * The user and password come from a file ("USER:PASSWORD" on its first
 * line), never from the URL. The database is created with its tables on
 * first use and migrated by later versions. Writes are batched (one
 * INSERT per table for a group of uploads) and idempotent across
 * collectors: an upload's rows carry its idempotency key, a retry through
 * any collector is recognised by the key, and reads count each upload once
 * even when two collectors raced to store it.
 *
 * A handle is used by one thread at a time; the collector opens one for
 * its writer thread (writer: it creates and migrates the schema and keeps
 * the byte budget) and one for reads. Failures return -errno with one line
 * in fp_ch_errmsg(): -ECONNREFUSED / -ETIMEDOUT / -EHOSTUNREACH (ClickHouse
 * cannot be reached or answered too slowly: the caller answers 503 and
 * the next call tries again), -EACCES (the credentials were refused),
 * -EPROTO (the database holds something else, or a newer schema), -EIO
 * (ClickHouse reported an error), -ENOMEM, -EINVAL.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct fp_ch;
struct fp_pprof;

#define FP_CH_SCHEMA_VERSION 8
#define FP_CH_DEFERRED       2 /* fp_ch_open(): not set up for now; see below */

/* True when spec names a ClickHouse store (clickhouse:// or clickhouses://). */
bool fp_ch_is_url(const char *spec);

/* Requests end at CLOCK_MONOTONIC deadline_ns (0: their own timeouts only): -ETIMEDOUT. */
void fp_ch_set_deadline(struct fp_ch *c, int64_t deadline_ns);
/*
 * Checks url and reads credentials_file (NULL: the user "default" without
 * a password), then sets up the schema (writer) or checks it (reader).
 * max_bytes: the byte budget of the database's tables (0: none). Returns
 * 0, or FP_CH_DEFERRED when ClickHouse could not be reached, answered a
 * schema step with an error (another collector's step racing it), or a
 * migration racing other collectors' did not settle (err holds the line
 * to log; every later call tries again), or -errno with one line in err.
 * *ret is the caller's unless the return is negative.
 */
int fp_ch_open(const char *url, const char *credentials_file, uint64_t max_bytes, bool writer,
               struct fp_ch **ret, char *err, size_t errlen);
/* Accepts NULL. */
void fp_ch_close(struct fp_ch *c);
/* One line on the last failure ("" when none). */
const char *fp_ch_errmsg(const struct fp_ch *c);

/* As fp_store_write_batches(): results[i] is 0, -EALREADY or the group's error. */
int fp_ch_write_batches(struct fp_ch *c, const struct fp_store_batch *const *batches, size_t n,
                        int *results);
/*
 * Retention: drops every whole hour (and day of stacks and names) that
 * ended at or before before_ns. Returns the uploads deleted, or -errno.
 */
int fp_ch_expire(struct fp_ch *c, int64_t before_ns);
/*
 * Summaries (ch-rollup.c): one step of keeping each ended hour's and
 * day's samples merged (grace_ns after its end), which profiles of whole
 * hours and days read. 1 when it did some, 0 when none is due, or -errno.
 */
/* Whether summaries are read and made (on when opened). */
void fp_ch_set_summaries(struct fp_ch *c, bool on);
int fp_ch_rollup_step(struct fp_ch *c, int64_t now_ns, int64_t grace_ns);

/* The reads, with the meaning store.h gives them (bucket_min/max do not apply). */
int fp_ch_query_pprof(struct fp_ch *c, const struct fp_store_filter *f, struct fp_pprof *p);
int fp_ch_drop_totals(struct fp_ch *c, const struct fp_store_filter *f, fp_store_drop_fn fn,
                      void *userdata);
int fp_ch_list_series(struct fp_ch *c, const struct fp_store_filter *f, fp_store_series_fn fn,
                      void *userdata);
int fp_ch_timeline(struct fp_ch *c, const struct fp_store_filter *f, fp_store_point_fn fn,
                   void *userdata);
int fp_ch_host_costs(struct fp_ch *c, const struct fp_store_filter *f, fp_store_host_cost_fn fn,
                     void *userdata);
/*
 * buckets (uploads), targets, file_bytes (the tables' parts on disk),
 * first_ns, last_ns; summaries: hours and days summarised (ClickHouse
 * counts a summary of all series as one), summaries_marked: ended hours
 * whose buckets no summary holds as they are (to be summarised).
 */
int fp_ch_stats(struct fp_ch *c, struct fp_store_stats *ret);

/* Uploaded debug files (debugfiles.h, ch-debug.c): what fp_dfiles_* mean. */
struct fp_dfiles_info;
int fp_ch_debug_put(struct fp_ch *c, const char *id, bool executable, const void *data, size_t len,
                    uint64_t budget, uint64_t *ret_evicted);
int fp_ch_debug_info(struct fp_ch *c, const char *id, struct fp_dfiles_info *ret);
int fp_ch_debug_get(struct fp_ch *c, const char *id, bool used, uint8_t **ret_data, size_t *ret_len,
                    struct fp_dfiles_info *ret_info);
int fp_ch_debug_totals(struct fp_ch *c, uint64_t *ret_files, uint64_t *ret_bytes);
