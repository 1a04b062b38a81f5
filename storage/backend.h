/* SPDX-License-Identifier: MIT */
/*
 * The collector's store, whichever it is: the embedded SQLite file (the
 * default: one collector, nothing else to run) or ClickHouse (many
 * stateless collectors on one shared store, clickhouse.h). The collector
 * writes and reads only through these calls, which mean what their
 * fp_store_* namesakes in store.h mean.
 *
 *   --store /var/lib/fleetprof-collector/collector.db       SQLite
 *   --store clickhouse://127.0.0.1:8123/fleetprof  ClickHouse
 *
 * The collector opens one handle for its writer thread (writer: creates,
 * migrates, keeps the byte budget) and one for reads on its loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct fp_backend;
struct fp_pprof;

/* Reads stop at CLOCK_MONOTONIC deadline_ns (0: none), failing with -ETIMEDOUT. */
void fp_backend_set_deadline(struct fp_backend *b, int64_t deadline_ns);
/* The deadline reads have now (0: none): what comes after the store's part keeps it too. */
int64_t fp_backend_deadline(const struct fp_backend *b);
/*
 * Opens spec (a path or a clickhouse:// URL); credentials_file applies to
 * ClickHouse only. Returns 0; or a positive value with a line in err to
 * log as a warning (a SQLite file moved aside as damaged, or ClickHouse
 * not reachable yet: every later call tries again); or -errno with one
 * line in err.
 */
int fp_backend_open(const char *spec, const char *credentials_file, uint64_t max_bytes, bool writer,
                    struct fp_backend **ret, char *err, size_t errlen);
void fp_backend_close(struct fp_backend *b);
bool fp_backend_is_clickhouse(const struct fp_backend *b);
const char *fp_backend_errmsg(const struct fp_backend *b);

int fp_backend_write_batches(struct fp_backend *b, const struct fp_store_batch *const *batches,
                             size_t n, int *results);
int fp_backend_expire(struct fp_backend *b, int64_t before_ns);
int fp_backend_query_pprof(struct fp_backend *b, const struct fp_store_filter *f,
                           struct fp_pprof *p);
int fp_backend_drop_totals(struct fp_backend *b, const struct fp_store_filter *f,
                           fp_store_drop_fn fn, void *userdata);
int fp_backend_list_series(struct fp_backend *b, const struct fp_store_filter *f,
                           fp_store_series_fn fn, void *userdata);
int fp_backend_timeline(struct fp_backend *b, const struct fp_store_filter *f, fp_store_point_fn fn,
                        void *userdata);
int fp_backend_host_costs(struct fp_backend *b, const struct fp_store_filter *f,
                          fp_store_host_cost_fn fn, void *userdata);
int fp_backend_stats(struct fp_backend *b, struct fp_store_stats *ret);
/*
 * One step of keeping the summaries (fp_store_rollup_step(), fp_ch_rollup_step()): 1 when
 * it did one, 0 when none is due, or -errno.
 */
/*
 * Whether summaries are read and made (on when opened). Off, every read
 * takes the raw rows and none is made; writes still mark what they change
 * (SQLite), so that what was kept stays true for a later start with them on.
 */
void fp_backend_set_summaries(struct fp_backend *b, bool on);
int fp_backend_rollup_step(struct fp_backend *b, int64_t now_ns, int64_t grace_ns);
