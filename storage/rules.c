/* SPDX-License-Identifier: MIT */
/*
 * The agent's rules, kept so that a restarted agent resumes them (store.h
 * says what a rule record is; schema.c has the table). The store holds
 * each rule's text without reading it: agent/rule.h owns the format.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store-internal.h"
#include "util.h"

/* Runs one statement that changes rows in a transaction of its own. */
static int write_one(struct fp_store *s, sqlite3_stmt *st, const char *what)
{
        int r = fp_store_db_begin(s);
        if (r < 0)
                return r;
        int rc = fp_store_db_step_done(st);
        if (rc != SQLITE_OK)
                r = fp_store_db_fail(s, rc, what);
        if (r == 0)
                r = fp_store_db_commit(s);
        if (r < 0)
                fp_store_db_rollback(s);
        return r;
}

int fp_store_rule_put(struct fp_store *s, int64_t id, uint32_t owner, const char *spec)
{
        sqlite3_stmt *st = NULL;
        int r;

        s->errmsg[0] = '\0';
        if (id <= 0 || !spec)
                return -EINVAL;
        if (s->readonly)
                return fp_store_db_failf(s, -EROFS,
                                         "Failed to keep a rule: the store is read-only");
        r = fp_store_prepare(
            s,
            "INSERT INTO rules (id, owner, spec, created_ns) VALUES (?1, ?2, ?3, ?4)"
            " ON CONFLICT (id) DO UPDATE SET owner = excluded.owner,"
            " spec = excluded.spec",
            &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_int64(st, 2, owner);
        sqlite3_bind_text(st, 3, spec, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, (int64_t)fp_now_ns(CLOCK_REALTIME));
        r = write_one(s, st, "keep a rule");
        sqlite3_finalize(st);
        return r;
}

int fp_store_rule_delete(struct fp_store *s, int64_t id)
{
        sqlite3_stmt *st = NULL;
        int r;

        s->errmsg[0] = '\0';
        if (s->readonly)
                return fp_store_db_failf(s, -EROFS,
                                         "Failed to forget a rule: the store is read-only");
        r = fp_store_prepare(s, "DELETE FROM rules WHERE id = ?1", &st);
        if (r < 0)
                return r;
        sqlite3_bind_int64(st, 1, id);
        r = write_one(s, st, "forget a rule");
        sqlite3_finalize(st);
        return r;
}

int fp_store_list_rules(struct fp_store *s, fp_store_rule_fn fn, void *userdata)
{
        sqlite3_stmt *st = NULL;
        int n = 0, rc, r;

        s->errmsg[0] = '\0';
        r = fp_store_prepare(s, "SELECT id, owner, spec FROM rules ORDER BY id", &st);
        if (r < 0)
                return r;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct fp_store_rule rule = {
                    .id = sqlite3_column_int64(st, 0),
                    .owner = (uint32_t)sqlite3_column_int64(st, 1),
                    .spec = fp_store_col_text(st, 2),
                };
                r = fn(userdata, &rule);
                if (r < 0)
                        break;
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = fp_store_db_fail(s, rc, "list rules");
        sqlite3_finalize(st);
        return r < 0 ? r : n;
}
