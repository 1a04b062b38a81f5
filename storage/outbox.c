/* SPDX-License-Identifier: MIT */
/*
 * The outbox: uploads built once and kept until the collector has them
 * (store.h says why; schema.c has the table, ring.c evicts from it).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store-internal.h"
#include "util.h"

static int insert(struct fp_store *s, const struct fp_store_upload *u, int64_t now)
{
        sqlite3_stmt *st = ST(s, FP_STMT_OUTBOX_INSERT);

        if (!u->key[0] || !u->query || (!u->body && u->len))
                return fp_store_db_failf(s, -EINVAL, "Failed to add an upload: it is incomplete");
        sqlite3_bind_text(st, 1, u->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, u->host ? u->host : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, u->pid);
        sqlite3_bind_int64(st, 4, (int64_t)u->starttime);
        sqlite3_bind_text(st, 5, u->event ? u->event : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, u->bucket_min);
        sqlite3_bind_int64(st, 7, u->bucket_max);
        sqlite3_bind_int64(st, 8, u->from_ns);
        sqlite3_bind_int64(st, 9, u->to_ns);
        sqlite3_bind_int64(st, 10, (int64_t)u->samples);
        sqlite3_bind_int(st, 11, u->counter);
        sqlite3_bind_int64(st, 12, u->created_ns ? u->created_ns : now);
        sqlite3_bind_text(st, 13, u->query, -1, SQLITE_STATIC);
        sqlite3_bind_blob64(st, 14, u->body ? (const void *)u->body : "", u->len, SQLITE_STATIC);
        CHECK_RC(s, fp_store_db_step_done(st), "add an upload to the outbox");
        return 0;
}

static int insert_all(struct fp_store *s, const struct fp_store_upload *u, size_t n)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        int r = 0;

        for (size_t i = 0; i < n && r == 0; i++)
                r = insert(s, &u[i], now);
        return r;
}

int fp_store_outbox_add(struct fp_store *s, const struct fp_store_upload *uploads, size_t n,
                        const int64_t *bucket_ids, size_t n_ids)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_REALTIME);
        int marked = 0, r;

        s->errmsg[0] = '\0';
        if ((n && !uploads) || (n_ids && !bucket_ids))
                return -EINVAL;
        if (s->readonly)
                return fp_store_db_failf(s, -EROFS,
                                         "Failed to add uploads: the store is read-only");
        r = fp_store_db_begin(s);
        if (r < 0)
                return r;
        r = insert_all(s, uploads, n);
        for (size_t i = 0; i < n_ids && r == 0; i++) {
                sqlite3_stmt *st = fp_store_stmt(s, FP_STMT_MARK_UPLOADED);
                int rc;

                if (!st) {
                        r = -EIO;
                        break;
                }
                sqlite3_bind_int64(st, 1, bucket_ids[i]);
                sqlite3_bind_int64(st, 2, now);
                rc = fp_store_db_step_done(st);
                if (rc != SQLITE_OK)
                        r = fp_store_db_fail(s, rc, "mark buckets uploaded");
                else
                        marked += sqlite3_changes(s->db);
        }
        if (r == 0)
                r = fp_store_db_commit(s);
        if (r < 0) {
                fp_store_db_rollback(s);
                return r;
        }
        return marked;
}

int fp_store_outbox_list(struct fp_store *s, size_t max, fp_store_upload_fn fn, void *userdata)
{
        sqlite3_stmt *st;
        int n = 0, rc, r;

        s->errmsg[0] = '\0';
        r = fp_store_read_begin(s);
        if (r < 0)
                return r;
        st = fp_store_stmt(s, FP_STMT_OUTBOX_LIST);
        if (!st) {
                fp_store_read_end(s);
                return -EIO;
        }
        sqlite3_bind_int64(st, 1, max > INT32_MAX ? INT32_MAX : (int64_t)max);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct fp_store_upload u = {
                    .id = sqlite3_column_int64(st, 0),
                    .host = fp_store_col_text(st, 2),
                    .pid = (int32_t)sqlite3_column_int64(st, 3),
                    .starttime = (uint64_t)sqlite3_column_int64(st, 4),
                    .event = fp_store_col_text(st, 5),
                    .bucket_min = sqlite3_column_int64(st, 6),
                    .bucket_max = sqlite3_column_int64(st, 7),
                    .from_ns = sqlite3_column_int64(st, 8),
                    .to_ns = sqlite3_column_int64(st, 9),
                    .samples = (uint64_t)sqlite3_column_int64(st, 10),
                    .counter = sqlite3_column_int(st, 11) != 0,
                    .created_ns = sqlite3_column_int64(st, 12),
                    .query = fp_store_col_text(st, 13),
                    .body = sqlite3_column_blob(st, 14),
                    .len = (size_t)sqlite3_column_bytes(st, 14),
                };
                snprintf(u.key, sizeof(u.key), "%s", fp_store_col_text(st, 1));
                n++;
                if ((r = fn(userdata, &u)) < 0)
                        break;
        }
        sqlite3_reset(st);
        fp_store_read_end(s);
        if (r < 0)
                return r;
        if (rc != SQLITE_DONE)
                return fp_store_db_fail(s, rc, "list the outbox");
        return n;
}

int fp_store_outbox_charge_delete(struct fp_store *s, int64_t id, const char *reason)
{
        sqlite3_stmt *st;

        if (reason) {
                st = ST(s, FP_STMT_OUTBOX_CHARGE);
                sqlite3_bind_int64(st, 1, id);
                sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
                CHECK_RC(s, fp_store_db_step_done(st), "count the samples of an upload");
        }
        st = ST(s, FP_STMT_OUTBOX_DELETE);
        sqlite3_bind_int64(st, 1, id);
        CHECK_RC(s, fp_store_db_step_done(st), "take an upload out of the outbox");
        return 0;
}

int fp_store_outbox_end(struct fp_store *s, int64_t id, enum fp_store_upload_end end,
                        const struct fp_store_upload *replacements, size_t n)
{
        int r;

        s->errmsg[0] = '\0';
        if (n && !replacements)
                return -EINVAL;
        if (s->readonly)
                return fp_store_db_failf(s, -EROFS,
                                         "Failed to end an upload: the store is read-only");
        r = fp_store_db_begin(s);
        if (r < 0)
                return r;
        r = fp_store_outbox_charge_delete(s, id,
                                          end == FP_UPLOAD_REFUSED ? "upload_rejected" : NULL);
        if (r == 0 && end == FP_UPLOAD_REPLACED)
                r = insert_all(s, replacements, n);
        if (r == 0)
                r = fp_store_db_commit(s);
        if (r < 0) {
                fp_store_db_rollback(s);
                return r;
        }
        return 0;
}
