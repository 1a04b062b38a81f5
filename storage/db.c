/* SPDX-License-Identifier: MIT */
/*
 * The store's connection core: SQLite result codes turned into -errno and
 * one message, the cache of prepared statements (their SQL is the
 * schema's: fp_store_stmt_sql[] in schema.c), and transactions. Every
 * other file of the store goes through these; none of them knows the
 * schema's tables.
 */
#include "store-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

int fp_store_db_errno(sqlite3 *db, int rc)
{
        int sys = db ? sqlite3_system_errno(db) : 0;

        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_ROW:
        case SQLITE_DONE:
                return 0;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_IOERR:
                if (sys == ENOSPC || sys == EDQUOT || sys == EFBIG)
                        return -ENOSPC;
                if (sys == EROFS)
                        return -EROFS;
                return -EIO;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_CANTOPEN:
                if (sys == EACCES || sys == EPERM || sys == EROFS || sys == ENOENT ||
                    sys == ENOTDIR || sys == ENOSPC || sys == EDQUOT || sys == EISDIR)
                        return -sys;
                return -EIO;
        case SQLITE_PERM:
        case SQLITE_AUTH:
                return -EACCES;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        case SQLITE_TOOBIG:
                return -E2BIG;
        case SQLITE_CONSTRAINT:
        case SQLITE_MISMATCH:
        case SQLITE_RANGE:
                return -EINVAL;
        default:
                return -EIO;
        }
}

int fp_store_db_fail(struct fp_store *s, int rc, const char *what)
{
        int r = fp_store_db_errno(s->db, rc);

        if ((rc & 0xff) == SQLITE_INTERRUPT && s->deadline_ns) {
                snprintf(s->errmsg, sizeof(s->errmsg),
                         "the read ran past its time limit: narrow the selection (host, "
                         "process, from, to)");
                return -ETIMEDOUT;
        }
        snprintf(s->errmsg, sizeof(s->errmsg), "Failed to %s in '%s': %s", what, s->path,
                 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        return r ? r : -EIO;
}

int fp_store_db_failf(struct fp_store *s, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
        va_end(ap);
        return r;
}

const char *fp_store_errmsg(const struct fp_store *s)
{
        return s ? s->errmsg : "no store";
}

int fp_store_db_exec(sqlite3 *db, const char *sql)
{
        return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

int fp_store_db_pragma_int(struct fp_store *s, const char *sql, int64_t *ret)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);

        if (rc == SQLITE_OK) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW) {
                        *ret = sqlite3_column_int64(st, 0);
                        rc = SQLITE_OK;
                }
        }
        sqlite3_finalize(st);
        return rc == SQLITE_OK ? 0 : fp_store_db_fail(s, rc, "read the store's settings");
}

sqlite3_stmt *fp_store_stmt(struct fp_store *s, enum fp_store_stmt_id id)
{
        int rc;

        if (s->st[id])
                return s->st[id];
        rc = sqlite3_prepare_v3(s->db, fp_store_stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                &s->st[id], NULL);
        if (rc != SQLITE_OK) {
                fp_store_db_fail(s, rc, "prepare a statement");
                s->st[id] = NULL;
                return NULL;
        }
        return s->st[id];
}

void fp_store_caches_clear(struct fp_store *s)
{
        fp_store_map_clear(&s->stacks);
        fp_store_map_clear(&s->frames);
        fp_store_map_clear(&s->functions);
        fp_store_map_clear(&s->mappings);
}

int fp_store_db_begin(struct fp_store *s)
{
        if (s->readonly)
                return fp_store_db_failf(
                    s, -EROFS, "Failed to write to store '%s': opened read-only", s->path);
        CHECK_RC(s, fp_store_db_step_done(ST(s, FP_STMT_BEGIN)), "begin a transaction");
        return 0;
}

int fp_store_db_commit(struct fp_store *s)
{
        CHECK_RC(s, fp_store_db_step_done(ST(s, FP_STMT_COMMIT)), "commit");
        return 0;
}

void fp_store_db_rollback(struct fp_store *s)
{
        if (!sqlite3_get_autocommit(s->db)) {
                sqlite3_stmt *st = fp_store_stmt(s, FP_STMT_ROLLBACK);
                if (st)
                        (void)fp_store_db_step_done(st);
                else
                        (void)fp_store_db_exec(s->db, "ROLLBACK");
        }
        fp_store_caches_clear(s);
}
