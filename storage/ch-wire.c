/* SPDX-License-Identifier: MIT */
/*
 * The ClickHouse store's requests (ch-internal.h): one SQL statement or
 * INSERT over HTTP with curl, its answer kept in the connection, its
 * error said in one line (the first of ClickHouse's text) as -errno:
 * -ETIMEDOUT past the time given (or the read's deadline), -EACCES for
 * refused credentials, -ECONNREFUSED or -EHOSTUNREACH when the server is
 * not there (the connection is then set up again), -EIO otherwise.
 */
#include "ch-internal.h"

#include "util.h"

#include <stdlib.h>

int fp_ch_failf(struct fp_ch *c, int r, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
        va_end(ap);
        return r;
}

int fp_ch_oom(struct fp_ch *c)
{
        return fp_ch_failf(c, -ENOMEM, "ClickHouse store: out of memory");
}

size_t fp_ch_on_answer(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct fp_ch *c = userdata;
        size_t n = size * nmemb;

        if (c->answer.n + n > MAX_ANSWER)
                return 0; /* curl fails the transfer: the answer is too large */
        buf_add(&c->answer, data, n);
        return c->answer.oom ? 0 : n;
}

/* The first line of ClickHouse's error text, without its stack trace. */
static void error_line(const struct buf *a, char *out, size_t len)
{
        size_t n = a->p ? strcspn(a->p, "\r\n") : 0;
        const char *s = a->p ? a->p : "";
        const char *st = strstr(s, ", Stack trace");
        if (st && (size_t)(st - s) < n)
                n = (size_t)(st - s);
        snprintf(out, len, "%.*s", (int)(n < 300 ? n : 300), s);
}

/*
 * One request: insert_sql set sends body as the INSERT's data (the query
 * in the URL); else body is the query. The answer lands in c->answer.
 */
static int request(struct fp_ch *c, const char *insert_sql, const void *body, size_t len,
                   long timeout_s)
{
        struct buf url = {0};
        char curl_err[CURL_ERROR_SIZE] = "", line[320];
        long code = 0;
        CURLcode cr;

        c->answer.n = 0;
        c->answer.oom = false;
        if (c->answer.p)
                c->answer.p[0] = 0;
        buf_printf(&url, "%s?wait_end_of_query=1", c->base); /* every name is qualified */
        if (insert_sql) {
                char *q = curl_easy_escape(c->curl, insert_sql, 0);
                if (!q) {
                        free(url.p);
                        return fp_ch_oom(c);
                }
                buf_printf(&url, "&query=%s", q);
                curl_free(q);
        }
        if (url.oom) {
                free(url.p);
                return fp_ch_oom(c);
        }
        curl_easy_setopt(c->curl, CURLOPT_URL, url.p);
        curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        long timeout_ms = timeout_s * 1000;
        if (c->deadline_ns) {
                int64_t left = (c->deadline_ns - (int64_t)fp_now_ns(CLOCK_MONOTONIC)) / 1000000;
                if (left < timeout_ms)
                        timeout_ms = left > 1 ? (long)left : 1;
        }
        curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, curl_err);
        cr = curl_easy_perform(c->curl);
        curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
        free(url.p);
        if (cr != CURLE_OK) {
                int r = cr == CURLE_OPERATION_TIMEDOUT             ? -ETIMEDOUT
                        : cr == CURLE_WRITE_ERROR && c->answer.oom ? -ENOMEM
                        : cr == CURLE_WRITE_ERROR                  ? -EFBIG
                        : cr == CURLE_COULDNT_RESOLVE_HOST         ? -EHOSTUNREACH
                                                                   : -ECONNREFUSED;
                c->ready = c->ready && r != -ECONNREFUSED && r != -EHOSTUNREACH;
                return fp_ch_failf(c, r, "ClickHouse at %s: %s", c->hostport,
                                   curl_err[0] ? curl_err : curl_easy_strerror(cr));
        }
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code != 200) {
                error_line(&c->answer, line, sizeof(line));
                if (code == 401 || code == 403 || strstr(line, "Code: 516") ||
                    strstr(line, "Code: 192") || strstr(line, "Code: 193"))
                        return fp_ch_failf(c, -EACCES,
                                           "ClickHouse at %s refused the credentials: %s",
                                           c->hostport, line);
                return fp_ch_failf(c, -EIO, "ClickHouse at %s: HTTP %ld: %s", c->hostport, code,
                                   line);
        }
        return 0;
}

int fp_ch_exec(struct fp_ch *c, const struct buf *sql, long timeout_s)
{
        if (sql->oom)
                return fp_ch_oom(c);
        return request(c, NULL, sql->p, sql->n, timeout_s);
}

int fp_ch_insert(struct fp_ch *c, const char *table, const char *columns, const struct buf *rows)
{
        char sql[512];

        if (rows->oom)
                return fp_ch_oom(c);
        if (!rows->n)
                return 0;
        snprintf(sql, sizeof(sql), "INSERT INTO %s.%s (%s) FORMAT RowBinary", c->db, table,
                 columns);
        return request(c, sql, rows->p, rows->n, WRITE_TIMEOUT_S);
}

int fp_ch_query_number(struct fp_ch *c, const struct buf *sql, const char *about, uint64_t *ret)
{
        int r = fp_ch_exec(c, sql, READ_TIMEOUT_S);

        if (r < 0)
                return r;
        struct rd rd = ANSWER(c);
        *ret = RD_U64(&rd);
        return rd.bad ? fp_ch_failf(c, -EIO, "ClickHouse at %s: unexpected answer about %s",
                                    c->hostport, about)
                      : 0;
}
