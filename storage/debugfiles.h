/* SPDX-License-Identifier: MIT */
/*
 * Debug files uploaded to the collector (from CI: `agentctl
 * upload-debuginfo`), kept by build ID beside its store so that every
 * collector of the store names frames from them and serves them back as
 * a debuginfod server:
 *
 *   SQLite store FILE.db    the file FILE.debuginfo.db beside it (its own
 *                           byte budget: uploads never push samples out)
 *   ClickHouse store        the tables debugfiles and debugfiles_used of
 *                           its database (schema 8), shared by all its
 *                           collectors: an upload to one is used by all
 *
 * A build's file is stored once (a second upload of the same build ID
 * only marks it used); when the files held pass the byte budget, the
 * least recently used go first (used: uploaded, or named from by a
 * collector). What the bytes are (an ELF file of that build, with
 * symbols) the caller checks before fp_dfiles_put().
 *
 * A handle belongs to one thread at a time; each thread that reads or
 * writes opens its own. Errors: -errno with one line in fp_dfiles_errmsg().
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fp_dfiles;

struct fp_dfiles_info {
        uint64_t size;
        bool executable; /* an unstripped executable (its code too), not a debug file only */
        int64_t added_ns;
};

/*
 * Opens the debug files of the store spec (backend.h's path or URL);
 * budget: bytes all files may take (0: none may be stored). ClickHouse is
 * reached on first use; its schema is made by the collector's writer.
 */
int fp_dfiles_open(const char *spec, const char *credentials_file, uint64_t budget,
                   struct fp_dfiles **ret, char *err, size_t errlen);
/* Accepts NULL. */
void fp_dfiles_close(struct fp_dfiles *f);
const char *fp_dfiles_errmsg(const struct fp_dfiles *f);
/* Requests end at CLOCK_MONOTONIC deadline_ns (0: none), -ETIMEDOUT. */
void fp_dfiles_set_deadline(struct fp_dfiles *f, int64_t deadline_ns);

/*
 * Stores data (len bytes) as build id's file (id: lower-case hex): 0
 * stored (*ret_evicted: files evicted to make room), 1 it was held
 * already (marked used, nothing written), -EFBIG larger than the whole
 * budget, or -errno.
 */
int fp_dfiles_put(struct fp_dfiles *f, const char *id, bool executable, const void *data,
                  size_t len, uint64_t *ret_evicted);
/* 1 with *ret when build id's file is held, 0 when not, or -errno. */
int fp_dfiles_info(struct fp_dfiles *f, const char *id, struct fp_dfiles_info *ret);
/*
 * 1 with build id's bytes (*ret_data malloc'd, *ret_len) and what it is,
 * 0 when not held, or -errno. used: marks it used now (a collector named
 * from it), which keeps it from eviction longest.
 */
int fp_dfiles_get(struct fp_dfiles *f, const char *id, bool used, uint8_t **ret_data,
                  size_t *ret_len, struct fp_dfiles_info *ret_info);
/* The files held and their bytes. 0 or -errno. */
int fp_dfiles_totals(struct fp_dfiles *f, uint64_t *ret_files, uint64_t *ret_bytes);
