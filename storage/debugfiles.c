/* SPDX-License-Identifier: MIT */
/*
 * Uploaded debug files (debugfiles.h): the SQLite side here, one table in
 * a file of its own beside the store, and each call sent on to
 * ch-debug.c for a ClickHouse store.
 *
 *   files(build_id TEXT UNIQUE, executable, size, added_ns, used_ns, data BLOB)
 *
 * A put is one transaction (IMMEDIATE: two collector threads storing at
 * once take turns): held already, it only moves used_ns; else the row is
 * written and the least recently used rows deleted until the rest fit the
 * budget. The file is made 0600: what was uploaded with the write token
 * is served only with the read token.
 */
#include "debugfiles.h"
#include "clickhouse.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUSY_MS 10000 /* another thread's put of a large file */

struct fp_dfiles {
        sqlite3 *db; /* one of the two */
        struct fp_ch *ch;
        uint64_t budget;
        int64_t deadline_ns;
        char errmsg[512];
};

static int failf(struct fp_dfiles *f, int r, const char *what)
{
        snprintf(f->errmsg, sizeof(f->errmsg), "debug files: %s: %s", what,
                 f->db ? sqlite3_errmsg(f->db) : strerror(-r));
        return r;
}

static int sq_errno(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_INTERRUPT:
                return -ETIMEDOUT;
        case SQLITE_READONLY:
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        default:
                return -EIO;
        }
}

/* FILE.db -> FILE.debuginfo.db; any other name gets .debuginfo.db added. */
static char *sibling(const char *spec)
{
        size_t n = strlen(spec);
        char *p;

        if (n > 3 && strcmp(spec + n - 3, ".db") == 0)
                n -= 3;
        p = malloc(n + sizeof(".debuginfo.db"));
        if (p) {
                memcpy(p, spec, n);
                memcpy(p + n, ".debuginfo.db", sizeof(".debuginfo.db"));
        }
        return p;
}

static int progress(void *arg)
{
        const struct fp_dfiles *f = arg;

        return f->deadline_ns && (int64_t)fp_now_ns(CLOCK_MONOTONIC) > f->deadline_ns;
}

static int sq_open(struct fp_dfiles *f, const char *spec, char *err, size_t errlen)
{
        _cleanup_free_ char *path = sibling(spec);
        int fd, rc;

        if (!path)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        /* Made 0600 before SQLite opens it (its journal takes the same mode). */
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return fp_errf(err, errlen, -errno, "cannot open the debug files' store %s: %s",
                               path, strerror(errno));
        close(fd);
        rc = sqlite3_open_v2(path, &f->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_exec(f->db,
                                  "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                                  "CREATE TABLE IF NOT EXISTS files (build_id TEXT NOT NULL UNIQUE,"
                                  " executable INTEGER NOT NULL, size INTEGER NOT NULL,"
                                  " added_ns INTEGER NOT NULL, used_ns INTEGER NOT NULL,"
                                  " data BLOB NOT NULL);"
                                  "CREATE INDEX IF NOT EXISTS files_used ON files (used_ns);",
                                  NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return fp_errf(err, errlen, sq_errno(rc),
                               "cannot open the debug files' store %s: %s", path,
                               f->db ? sqlite3_errmsg(f->db) : sqlite3_errstr(rc));
        sqlite3_busy_timeout(f->db, BUSY_MS);
        sqlite3_progress_handler(f->db, 1000, progress, f);
        return 0;
}

int fp_dfiles_open(const char *spec, const char *credentials_file, uint64_t budget,
                   struct fp_dfiles **ret, char *err, size_t errlen)
{
        struct fp_dfiles *f = calloc(1, sizeof(*f));
        int r;

        if (!f)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        f->budget = budget;
        if (fp_ch_is_url(spec)) {
                r = fp_ch_open(spec, credentials_file, 0, false, &f->ch, err, errlen);
                r = r == FP_CH_DEFERRED ? 0 : r;
        } else {
                r = sq_open(f, spec, err, errlen);
        }
        if (r < 0) {
                fp_dfiles_close(f);
                return r;
        }
        *ret = f;
        return 0;
}

void fp_dfiles_close(struct fp_dfiles *f)
{
        if (!f)
                return;
        sqlite3_close(f->db);
        fp_ch_close(f->ch);
        free(f);
}

const char *fp_dfiles_errmsg(const struct fp_dfiles *f)
{
        return f->ch ? fp_ch_errmsg(f->ch) : f->errmsg;
}

void fp_dfiles_set_deadline(struct fp_dfiles *f, int64_t deadline_ns)
{
        f->deadline_ns = deadline_ns;
        if (f->ch)
                fp_ch_set_deadline(f->ch, deadline_ns);
}

static int step_done(struct fp_dfiles *f, sqlite3_stmt *st, const char *what)
{
        int rc = sqlite3_step(st);

        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : failf(f, sq_errno(rc), what);
}

/* A statement with the build ID bound as its first parameter (NULL: said in errmsg). */
static sqlite3_stmt *prep(struct fp_dfiles *f, const char *sql, const char *id)
{
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(f->db, sql, -1, &st, NULL) != SQLITE_OK) {
                failf(f, -EIO, "cannot prepare a statement");
                return NULL;
        }
        if (id)
                sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        return st;
}

static int touch(struct fp_dfiles *f, const char *id, int64_t now)
{
        sqlite3_stmt *st = prep(f, "UPDATE files SET used_ns = ?2 WHERE build_id = ?1", id);

        if (!st)
                return -EIO;
        sqlite3_bind_int64(st, 2, now);
        return step_done(f, st, "cannot mark a file used");
}

/* Under the put's transaction: deletes the least recently used until the rest fit. */
static int sq_evict(struct fp_dfiles *f, const char *keep, uint64_t *ret_evicted)
{
        for (;;) {
                sqlite3_stmt *st = prep(f, "SELECT coalesce(sum(size), 0) FROM files", NULL);
                uint64_t total;
                int rc;

                if (!st)
                        return -EIO;
                rc = sqlite3_step(st);
                total = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
                sqlite3_finalize(st);
                if (rc != SQLITE_ROW)
                        return failf(f, sq_errno(rc), "cannot sum the files' sizes");
                if (total <= f->budget)
                        return 0;
                st = prep(f,
                          "DELETE FROM files WHERE rowid = (SELECT rowid FROM files"
                          " WHERE build_id != ?1 ORDER BY used_ns LIMIT 1)",
                          keep);
                if (!st)
                        return -EIO;
                if ((rc = step_done(f, st, "cannot evict a file")) < 0)
                        return rc;
                if (sqlite3_changes(f->db) == 0)
                        return 0; /* only keep is left */
                (*ret_evicted)++;
        }
}

static int sq_put(struct fp_dfiles *f, const char *id, bool executable, const void *data,
                  size_t len, uint64_t *ret_evicted)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        sqlite3_stmt *st;
        int r, rc;

        rc = sqlite3_exec(f->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_OK)
                return failf(f, sq_errno(rc), "cannot begin a write");
        st = prep(f, "SELECT 1 FROM files WHERE build_id = ?1", id);
        if (!st) {
                r = -EIO;
                goto out;
        }
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc == SQLITE_ROW) {
                r = touch(f, id, now);
                r = r < 0 ? r : 1;
                goto out;
        }
        if (rc != SQLITE_DONE) {
                r = failf(f, sq_errno(rc), "cannot look a build up");
                goto out;
        }
        st = prep(f,
                  "INSERT INTO files (build_id, executable, size, added_ns, used_ns, data)"
                  " VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                  id);
        if (!st) {
                r = -EIO;
                goto out;
        }
        sqlite3_bind_int(st, 2, executable);
        sqlite3_bind_int64(st, 3, (int64_t)len);
        sqlite3_bind_int64(st, 4, now);
        sqlite3_bind_blob64(st, 5, data, len, SQLITE_STATIC);
        if ((r = step_done(f, st, "cannot store the file")) == 0)
                r = sq_evict(f, id, ret_evicted);
out:
        if (r >= 0 && (rc = sqlite3_exec(f->db, "COMMIT", NULL, NULL, NULL)) != SQLITE_OK)
                r = failf(f, sq_errno(rc), "cannot commit");
        if (r < 0)
                sqlite3_exec(f->db, "ROLLBACK", NULL, NULL, NULL);
        return r;
}

int fp_dfiles_put(struct fp_dfiles *f, const char *id, bool executable, const void *data,
                  size_t len, uint64_t *ret_evicted)
{
        *ret_evicted = 0;
        f->errmsg[0] = 0;
        if (len > f->budget) {
                snprintf(
                    f->errmsg, sizeof(f->errmsg),
                    "the file (%zu bytes) is larger than the debug files' whole budget (%" PRIu64
                    " bytes, --debuginfo-mb)",
                    len, f->budget);
                return -EFBIG;
        }
        if (f->ch)
                return fp_ch_debug_put(f->ch, id, executable, data, len, f->budget, ret_evicted);
        return sq_put(f, id, executable, data, len, ret_evicted);
}

/* SELECT executable, size, added_ns[, data] of one build: 1, 0 or -errno. */
static int sq_row(struct fp_dfiles *f, const char *id, bool with_data, uint8_t **ret_data,
                  size_t *ret_len, struct fp_dfiles_info *ret)
{
        sqlite3_stmt *st = prep(
            f,
            with_data ? "SELECT executable, size, added_ns, data FROM files WHERE build_id = ?1"
                      : "SELECT executable, size, added_ns FROM files WHERE build_id = ?1",
            id);
        int rc, r = 1;

        if (!st)
                return -EIO;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                ret->executable = sqlite3_column_int(st, 0) != 0;
                ret->size = (uint64_t)sqlite3_column_int64(st, 1);
                ret->added_ns = sqlite3_column_int64(st, 2);
                if (with_data) {
                        const void *p = sqlite3_column_blob(st, 3);
                        size_t n = (size_t)sqlite3_column_bytes(st, 3);

                        *ret_data = malloc(n ? n : 1);
                        if (!*ret_data) {
                                r = -ENOMEM;
                                snprintf(f->errmsg, sizeof(f->errmsg), "out of memory");
                        } else {
                                memcpy(*ret_data, p, n);
                                *ret_len = n;
                        }
                }
        } else {
                r = rc == SQLITE_DONE ? 0 : failf(f, sq_errno(rc), "cannot read a file");
        }
        sqlite3_finalize(st);
        return r;
}

int fp_dfiles_info(struct fp_dfiles *f, const char *id, struct fp_dfiles_info *ret)
{
        f->errmsg[0] = 0;
        if (f->ch)
                return fp_ch_debug_info(f->ch, id, ret);
        return sq_row(f, id, false, NULL, NULL, ret);
}

int fp_dfiles_get(struct fp_dfiles *f, const char *id, bool used, uint8_t **ret_data,
                  size_t *ret_len, struct fp_dfiles_info *ret_info)
{
        int r;

        f->errmsg[0] = 0;
        if (f->ch)
                return fp_ch_debug_get(f->ch, id, used, ret_data, ret_len, ret_info);
        r = sq_row(f, id, true, ret_data, ret_len, ret_info);
        if (r > 0 && used && touch(f, id, (int64_t)fp_now_ns(CLOCK_REALTIME)) < 0) {
                /* Named all the same: only its place in the eviction order is older. */
        }
        return r;
}

int fp_dfiles_totals(struct fp_dfiles *f, uint64_t *ret_files, uint64_t *ret_bytes)
{
        sqlite3_stmt *st;
        int rc;

        f->errmsg[0] = 0;
        if (f->ch)
                return fp_ch_debug_totals(f->ch, ret_files, ret_bytes);
        st = prep(f, "SELECT count(*), coalesce(sum(size), 0) FROM files", NULL);
        if (!st)
                return -EIO;
        rc = sqlite3_step(st);
        *ret_files = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
        *ret_bytes = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 1) : 0;
        sqlite3_finalize(st);
        return rc == SQLITE_ROW ? 0 : failf(f, sq_errno(rc), "cannot count the files");
}
