/* SPDX-License-Identifier: MIT */
/*
 * The upload contract: writing and parsing an upload's query string and
 * its Idempotency-Key; see upload_contract.h. The parser treats its input
 * as hostile: presence, range and characters are checked before anything
 * is stored.
 */
#include "upload_contract.h"
#include "escape.h"
#include "util.h"

#include <errno.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decimal integer in [lo, hi], nothing else. */
static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *ret)
{
        char *end;
        long long v;

        if (!*s || (*s != '-' && (*s < '0' || *s > '9')))
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || *end || v < lo || v > hi)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_u64(const char *s, uint64_t *ret)
{
        char *end;
        unsigned long long v;

        if (*s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* No control characters (they would break logs and the web page). */
static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

static bool chars_in(const char *s, const char *extra)
{
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || strchr(extra, *s)))
                        return false;
        return true;
}

/* Copies a text parameter of at most size - 1 bytes, printable. */
static int copy_text(const char *name, const char *v, char *dst, size_t size, bool required,
                     char *err, size_t errlen)
{
        size_t n = strlen(v);

        if (required && n == 0)
                return fp_errf(err, errlen, -EINVAL, "parameter '%s' is empty", name);
        if (n >= size)
                return fp_errf(err, errlen, -EINVAL, "parameter '%s' is longer than %zu bytes",
                               name, size - 1);
        if (!printable(v))
                return fp_errf(err, errlen, -EINVAL, "parameter '%s' contains control characters",
                               name);
        memcpy(dst, v, n + 1);
        return 0;
}

/* "reason:count,reason:count": reasons [a-z0-9_], counts summed per reason. */
static int parse_drops(const char *v, struct fp_upload_meta *m, char *err, size_t errlen)
{
        const char *p = v;

        while (*p) {
                const char *colon = strchr(p, ':'), *comma;
                char num[24];
                uint64_t count;
                size_t rlen, nlen, i;

                if (!colon)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': '%.40s' is not reason:count", p);
                comma = strchr(colon, ',');
                if (!comma)
                        comma = colon + strlen(colon);
                rlen = (size_t)(colon - p);
                nlen = (size_t)(comma - colon - 1);
                if (rlen == 0 || rlen >= sizeof(m->drops[0].reason))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': a reason must be 1 to %zu characters",
                                       sizeof(m->drops[0].reason) - 1);
                for (i = 0; i < rlen; i++)
                        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') ||
                              p[i] == '_'))
                                return fp_errf(err, errlen, -EINVAL,
                                               "parameter 'drops': reason '%.*s' is not [a-z0-9_]",
                                               (int)(rlen > 40 ? 40 : rlen), p);
                if (nlen == 0 || nlen >= sizeof(num))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': bad count for reason '%.*s'", (int)rlen,
                                       p);
                memcpy(num, colon + 1, nlen);
                num[nlen] = 0;
                if (parse_u64(num, &count) < 0 || count > INT64_MAX)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'drops': count '%s' of reason '%.*s' is not a "
                                       "non-negative integer",
                                       num, (int)rlen, p);
                for (i = 0; i < m->n_drops; i++)
                        if (strlen(m->drops[i].reason) == rlen &&
                            memcmp(m->drops[i].reason, p, rlen) == 0)
                                break;
                if (i == m->n_drops) {
                        if (m->n_drops == FP_UPLOAD_MAX_DROPS)
                                return fp_errf(err, errlen, -EINVAL,
                                               "parameter 'drops': more than %d reasons",
                                               FP_UPLOAD_MAX_DROPS);
                        memcpy(m->drops[i].reason, p, rlen);
                        m->drops[i].reason[rlen] = 0;
                        m->drops[i].count = 0;
                        m->n_drops++;
                }
                m->drops[i].count = count > (uint64_t)INT64_MAX - m->drops[i].count
                                        ? (uint64_t)INT64_MAX
                                        : m->drops[i].count + count;
                p = *comma ? comma + 1 : comma;
        }
        return 0;
}

enum {
        P_HOST = 1 << 0,
        P_PID = 1 << 1,
        P_STARTTIME = 1 << 2,
        P_COMM = 1 << 3,
        P_EXE = 1 << 4,
        P_EVENT = 1 << 5,
        P_FROM = 1 << 6,
        P_TO = 1 << 7,
        P_AGENT = 1 << 8,
        P_DROPS = 1 << 9,
        P_SERVICE = 1 << 10,
        P_AGENT_CPU = 1 << 11,
        P_AGENT_RSS = 1 << 12,
        P_HOST_CPUS = 1 << 13,
        P_COST_FROM = 1 << 14,
        P_COST_TO = 1 << 15,
        P_CONTAINER = 1 << 16,
        P_TIER = 1 << 17,
        P_COST = P_AGENT_CPU | P_AGENT_RSS | P_HOST_CPUS | P_COST_FROM | P_COST_TO,
        P_REQUIRED = P_HOST | P_PID | P_STARTTIME | P_EVENT | P_FROM | P_TO,
};

static const struct {
        const char *name;
        int bit;
} params[] = {
    {"host", P_HOST},
    {"pid", P_PID},
    {"starttime", P_STARTTIME},
    {"comm", P_COMM},
    {"exe", P_EXE},
    {"event", P_EVENT},
    {"from", P_FROM},
    {"to", P_TO},
    {"agent", P_AGENT},
    {"drops", P_DROPS},
    {"service", P_SERVICE},
    {"container", P_CONTAINER},
    {"tier", P_TIER},
    {"agent_cpu_ns", P_AGENT_CPU},
    {"agent_rss", P_AGENT_RSS},
    {"host_cpus", P_HOST_CPUS},
    {"cost_from", P_COST_FROM},
    {"cost_to", P_COST_TO},
};

/* Ten years: a longer time range is a bug or an attack, not a bucket. */
#define MAX_RANGE_NS (10LL * 366 * 24 * 3600 * 1000000000LL)

static int meta_param(struct fp_upload_meta *m, int bit, const char *name, const char *v, char *err,
                      size_t errlen)
{
        int64_t n;

        switch (bit) {
        case P_HOST:
                if (!*v || !chars_in(v, ".-_:[]"))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'host' must be a host name (letters, digits, "
                                       "'.', '-', '_')");
                return copy_text(name, v, m->host, sizeof(m->host), true, err, errlen);
        case P_PID:
                if (parse_i64(v, 0, INT_MAX, &n) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'pid' must be an integer from 0 to %d", INT_MAX);
                m->pid = (pid_t)n;
                return 0;
        case P_STARTTIME:
                if (parse_u64(v, &m->starttime) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'starttime' must be a non-negative integer");
                return 0;
        case P_COMM:
                return copy_text(name, v, m->comm, sizeof(m->comm), false, err, errlen);
        case P_EXE:
                return copy_text(name, v, m->exe, sizeof(m->exe), false, err, errlen);
        case P_EVENT:
                if (!*v || !chars_in(v, "-_.:/"))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'event' must be an event name such as cpu-clock");
                return copy_text(name, v, m->event, sizeof(m->event), true, err, errlen);
        case P_FROM:
        case P_TO:
        case P_COST_FROM:
        case P_COST_TO:
                if (parse_i64(v, 0, INT64_MAX, &n) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter '%s' must be a time in nanoseconds since the "
                                       "epoch",
                                       name);
                *(bit == P_FROM        ? &m->from_ns
                  : bit == P_TO        ? &m->to_ns
                  : bit == P_COST_FROM ? &m->cost.from_ns
                                       : &m->cost.to_ns) = n;
                return 0;
        case P_AGENT:
                return copy_text(name, v, m->agent, sizeof(m->agent), false, err, errlen);
        case P_DROPS:
                return parse_drops(v, m, err, errlen);
        case P_AGENT_CPU:
        case P_AGENT_RSS:
        case P_HOST_CPUS: {
                uint64_t u;
                if (parse_u64(v, &u) < 0 || (bit == P_HOST_CPUS && u > 65536))
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter '%s' must be a non-negative integer%s", name,
                                       bit == P_HOST_CPUS ? " up to 65536" : "");
                if (bit == P_AGENT_CPU)
                        m->cost.agent_cpu_ns = u;
                else if (bit == P_AGENT_RSS)
                        m->cost.agent_rss_bytes = u;
                else
                        m->cost.host_cpus = (uint32_t)u;
                return 0;
        }
        case P_SERVICE:
                if (fp_upload_check_service(v) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'service' must be 1 to %d letters, digits, "
                                       "'.', '-', '_', '@' or ':'",
                                       FP_UPLOAD_MAX_SERVICE);
                return copy_text(name, v, m->service, sizeof(m->service), true, err, errlen);
        case P_TIER:
                if (strcmp(v, "host") != 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'tier' must be 'host' (a host tier's round)");
                m->host_tier = true;
                return 0;
        case P_CONTAINER:
                if (fp_upload_check_container(v) < 0)
                        return fp_errf(err, errlen, -EINVAL,
                                       "parameter 'container' must be 1 to %d lowercase hex "
                                       "digits (a container ID)",
                                       FP_UPLOAD_MAX_CONTAINER);
                return copy_text(name, v, m->container, sizeof(m->container), true, err, errlen);
        }
        return -EINVAL;
}

int fp_upload_parse_query(const char *query, struct fp_upload_meta *ret, char *err, size_t errlen)
{
        struct evkeyvalq q;
        struct evkeyval *kv;
        struct fp_upload_meta *m;
        int seen = 0, r = 0;

        m = calloc(1, sizeof(*m));
        if (!m)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        TAILQ_INIT(&q);
        if (evhttp_parse_query_str(query ? query : "", &q) < 0) {
                r = fp_errf(err, errlen, -EINVAL, "the query string is malformed");
                goto out;
        }
        TAILQ_FOREACH(kv, &q, next)
        {
                size_t i;

                for (i = 0; i < sizeof(params) / sizeof(params[0]); i++)
                        if (strcmp(kv->key, params[i].name) == 0)
                                break;
                if (i == sizeof(params) / sizeof(params[0])) {
                        r = fp_errf(err, errlen, -EINVAL, "unknown parameter '%.64s'", kv->key);
                        goto out;
                }
                if (seen & params[i].bit) {
                        r = fp_errf(err, errlen, -EINVAL, "parameter '%s' is given twice",
                                    params[i].name);
                        goto out;
                }
                seen |= params[i].bit;
                r = meta_param(m, params[i].bit, params[i].name, kv->value, err, errlen);
                if (r < 0)
                        goto out;
        }
        for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
                if ((P_REQUIRED & params[i].bit) && !(seen & params[i].bit)) {
                        r = fp_errf(err, errlen, -EINVAL, "missing parameter '%s'", params[i].name);
                        goto out;
                }
        if ((seen & P_COST) &&
            ((seen & P_COST) != P_COST || m->cost.host_cpus == 0 ||
             m->cost.to_ns <= m->cost.from_ns || m->cost.to_ns - m->cost.from_ns > MAX_RANGE_NS)) {
                r = fp_errf(err, errlen, -EINVAL,
                            "the cost parameters (agent_cpu_ns, agent_rss, host_cpus, cost_from, "
                            "cost_to) come all together, with host_cpus > 0 and a range");
                goto out;
        }
        if (m->host_tier && (m->pid != 0 || m->service[0] || m->container[0])) {
                r = fp_errf(err, errlen, -EINVAL,
                            "a host tier's round (tier=host) has pid=0 and no service or "
                            "container: its samples carry them");
                goto out;
        }
        if (m->to_ns <= m->from_ns || m->to_ns - m->from_ns > MAX_RANGE_NS) {
                r = fp_errf(err, errlen, -EINVAL,
                            "the time range from=%" PRId64 " to=%" PRId64
                            " is empty, reversed or longer than ten years",
                            m->from_ns, m->to_ns);
                goto out;
        }
        memcpy(ret, m, sizeof(*m));
out:
        evhttp_clear_headers(&q);
        free(m);
        return r;
}

int fp_upload_check_service(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n > FP_UPLOAD_MAX_SERVICE || !chars_in(name, ".-_@:"))
                return -EINVAL;
        return 0;
}

uint64_t fp_upload_host_series_key(const char *service, const char *exe, const char *container)
{
        uint64_t x = fp_fnv1a(FP_FNV1A_SEED, service, strlen(service));

        x = fp_fnv1a(x, "\xff", 1);
        x = fp_fnv1a(x, exe, strlen(exe));
        if (container[0]) { /* none: the key series had before containers were kept */
                x = fp_fnv1a(x, "\xfe", 1);
                x = fp_fnv1a(x, container, strlen(container));
        }
        return (x & INT64_MAX) | 1; /* never 0: 0 means "any" in filters */
}

int fp_upload_check_container(const char *id)
{
        size_t n = strlen(id);

        if (n == 0 || n > FP_UPLOAD_MAX_CONTAINER || strspn(id, "0123456789abcdef") != n)
                return -EINVAL;
        return 0;
}

int fp_upload_check_key(const char *key, char *err, size_t errlen)
{
        size_t n = strlen(key);

        if (n == 0 || n > FP_UPLOAD_MAX_KEY)
                return fp_errf(err, errlen, -EINVAL, "Idempotency-Key must be 1 to %d characters",
                               FP_UPLOAD_MAX_KEY);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)key[i] <= 0x20 || (unsigned char)key[i] >= 0x7f)
                        return fp_errf(err, errlen, -EINVAL,
                                       "Idempotency-Key must be printable ASCII without spaces");
        return 0;
}

/* Appends "&key=value" (the first without '&'), value percent-encoded. */
static void put_param(FILE *f, bool *first, const char *key, const char *value)
{
        fprintf(f, "%s%s=", *first ? "" : "&", key);
        fp_escape_url(fp_write_file, f, value);
        *first = false;
}

int fp_upload_encode_query(const struct fp_upload_meta *m, char **ret)
{
        char *buf = NULL, *drops = NULL, num[32];
        size_t len = 0;
        bool first = true;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return -ENOMEM;
        put_param(f, &first, "host", m->host);
        snprintf(num, sizeof(num), "%d", (int)m->pid);
        put_param(f, &first, "pid", num);
        snprintf(num, sizeof(num), "%" PRIu64, m->starttime);
        put_param(f, &first, "starttime", num);
        put_param(f, &first, "comm", m->comm);
        put_param(f, &first, "exe", m->exe);
        put_param(f, &first, "event", m->event);
        snprintf(num, sizeof(num), "%" PRId64, m->from_ns);
        put_param(f, &first, "from", num);
        snprintf(num, sizeof(num), "%" PRId64, m->to_ns);
        put_param(f, &first, "to", num);
        put_param(f, &first, "agent", m->agent);
        if (m->service[0])
                put_param(f, &first, "service", m->service);
        if (m->container[0])
                put_param(f, &first, "container", m->container);
        if (m->host_tier)
                put_param(f, &first, "tier", "host");
        if (m->cost.host_cpus) {
                snprintf(num, sizeof(num), "%" PRIu64, m->cost.agent_cpu_ns);
                put_param(f, &first, "agent_cpu_ns", num);
                snprintf(num, sizeof(num), "%" PRIu64, m->cost.agent_rss_bytes);
                put_param(f, &first, "agent_rss", num);
                snprintf(num, sizeof(num), "%u", m->cost.host_cpus);
                put_param(f, &first, "host_cpus", num);
                snprintf(num, sizeof(num), "%" PRId64, m->cost.from_ns);
                put_param(f, &first, "cost_from", num);
                snprintf(num, sizeof(num), "%" PRId64, m->cost.to_ns);
                put_param(f, &first, "cost_to", num);
        }
        for (size_t i = 0; i < m->n_drops; i++)
                if (fp_upload_drops_append(&drops, m->drops[i].reason, m->drops[i].count) < 0) {
                        fclose(f);
                        free(buf);
                        free(drops);
                        return -ENOMEM;
                }
        if (drops)
                put_param(f, &first, "drops", drops);
        free(drops);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}

int fp_upload_drops_append(char **text, const char *reason, uint64_t count)
{
        char *next = NULL;
        if (asprintf(&next, "%s%s%s:%" PRIu64, *text ? *text : "", *text ? "," : "", reason,
                     count) < 0)
                return -ENOMEM;
        free(*text);
        *text = next;
        return 0;
}
