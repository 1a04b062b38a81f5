/* SPDX-License-Identifier: MIT */
/*
 * The protocols an upload can travel in; see wire.h for what goes where.
 *
 * Pyroscope's push (push/v1/push.proto, types/v1/types.proto):
 *   PushRequest      { repeated RawProfileSeries series = 1; }
 *   RawProfileSeries { repeated LabelPair labels = 1; repeated RawSample samples = 2; }
 *   LabelPair        { string name = 1; string value = 2; }
 *   RawSample        { bytes raw_profile = 1; string ID = 2; }
 * OTLP's request is written by fp_pprof_to_otlp() (proto/pprof_otlp.c);
 * its answer:
 *   ExportProfilesServiceResponse { ExportProfilesPartialSuccess partial_success = 1; }
 *   ExportProfilesPartialSuccess  { int64 rejected_profiles = 1; string error_message = 2; }
 */
#include "wire.h"
#include "pbwire.h"
#include "pprof.h"
#include "upload_contract.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOST_TIER_SERVICE "fleetprof-host-tier"
#define MAX_GROUPS                                                                                 \
        1023 /* a host tier round's series, at most (and the tier's own): the collector takes 1024 \
              */

static const struct {
        const char *prefix;
        enum fp_wire w;
} prefixes[] = {
    {"pyroscope+", FP_WIRE_PYROSCOPE},
    {"otlp+", FP_WIRE_OTLP},
    {"", FP_WIRE_NATIVE},
};

int fp_wire_of_url(const char *url, enum fp_wire *ret, size_t *ret_skip)
{
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                size_t n = strlen(prefixes[i].prefix);
                const char *rest = url + n;
                if (strncmp(url, prefixes[i].prefix, n) != 0)
                        continue;
                if (strncmp(rest, "http://", 7) != 0 && strncmp(rest, "https://", 8) != 0)
                        return -EINVAL;
                *ret = prefixes[i].w;
                *ret_skip = n;
                return 0;
        }
        return -EINVAL;
}

const char *fp_wire_name(enum fp_wire w)
{
        return w == FP_WIRE_PYROSCOPE ? "Pyroscope" : w == FP_WIRE_OTLP ? "OTLP" : "fleetprof";
}

const char *fp_wire_path(enum fp_wire w)
{
        return w == FP_WIRE_PYROSCOPE ? "/push.v1.PusherService/Push"
               : w == FP_WIRE_OTLP    ? "/v1development/profiles"
                                      : FP_UPLOAD_PATH;
}

/* ---- credentials ---- */

void fp_wire_credentials_clear(struct fp_wire_credentials *c)
{
        /* Secrets do not linger in freed memory. */
        char *v[] = {c->bearer, c->user, c->password, c->tenant};
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                if (v[i])
                        explicit_bzero(v[i], strlen(v[i]));
                free(v[i]);
        }
        *c = (struct fp_wire_credentials){0};
}

/* A tenant ID as Grafana's servers take it: letters, digits and !-_.*'() (150 at most). */
static bool tenant_ok(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > 150 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr("!-_.*'()", *s))
                        return false;
        return true;
}

static int cred_line(struct fp_wire_credentials *c, const char *path, unsigned lineno, char *line,
                     char *err, size_t err_len)
{
        char *key = line, *val;

        while (*key == ' ' || *key == '\t')
                key++;
        if (!*key || *key == '#')
                return 0;
        val = key + strcspn(key, " \t");
        if (*val)
                *val++ = 0;
        while (*val == ' ' || *val == '\t')
                val++;
        for (char *t = val + strlen(val); t > val && (t[-1] == ' ' || t[-1] == '\t');)
                *--t = 0;
        for (const char *t = val; *t; t++)
                if (!isprint((unsigned char)*t))
                        return fp_errf(err, err_len, -EINVAL,
                                       "credentials file '%s' line %u: a non-printable byte", path,
                                       lineno);
        if (!*val)
                return fp_errf(err, err_len, -EINVAL,
                               "credentials file '%s' line %u: '%.20s' without a value", path,
                               lineno, key);
        if (strcmp(key, "bearer") == 0 || strcmp(key, "basic") == 0) {
                if (c->bearer || c->user)
                        return fp_errf(err, err_len, -EINVAL,
                                       "credentials file '%s' line %u: one of bearer and basic, "
                                       "once",
                                       path, lineno);
                if (strcmp(key, "bearer") == 0) {
                        if (strchr(val, ' '))
                                return fp_errf(err, err_len, -EINVAL,
                                               "credentials file '%s' line %u: a bearer token "
                                               "holds no spaces",
                                               path, lineno);
                        c->bearer = strdup(val);
                        return c->bearer ? 0 : -ENOMEM;
                }
                char *colon = strchr(val, ':');
                if (!colon || colon == val)
                        return fp_errf(err, err_len, -EINVAL,
                                       "credentials file '%s' line %u: basic takes USER:PASSWORD",
                                       path, lineno);
                c->user = strndup(val, (size_t)(colon - val));
                c->password = strdup(colon + 1);
                return c->user && c->password ? 0 : -ENOMEM;
        }
        if (strcmp(key, "tenant") == 0) {
                if (c->tenant || !tenant_ok(val))
                        return fp_errf(err, err_len, -EINVAL, "credentials file '%s' line %u: %s",
                                       path, lineno,
                                       c->tenant ? "tenant given twice"
                                                 : "a tenant is 1 to 150 letters, digits and "
                                                   "!-_.*'()");
                c->tenant = strdup(val);
                return c->tenant ? 0 : -ENOMEM;
        }
        return fp_errf(err, err_len, -EINVAL,
                       "credentials file '%s' line %u: unknown key '%.40s' (bearer, basic, "
                       "tenant)",
                       path, lineno, key);
}

int fp_wire_read_credentials(const char *path, struct fp_wire_credentials *ret, char *err,
                             size_t err_len)
{
        char buf[8193];
        struct stat st;
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), r = 0;
        unsigned lineno = 0;

        *ret = (struct fp_wire_credentials){0};
        if (fd < 0)
                return fp_errf(err, err_len, -errno, "Failed to read the credentials file '%s': %s",
                               path, strerror(errno));
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return fp_errf(err, err_len, -EINVAL, "credentials file '%s' is not a regular file",
                               path);
        }
        if (st.st_mode & 007) {
                close(fd);
                return fp_errf(err, err_len, -EPERM,
                               "credentials file '%s' can be read or written by anyone (mode "
                               "%04o): chmod o= it",
                               path, (unsigned)(st.st_mode & 07777));
        }
        n = read(fd, buf, sizeof(buf) - 1);
        int e = errno;
        close(fd);
        if (n < 0)
                return fp_errf(err, err_len, -e, "Failed to read the credentials file '%s': %s",
                               path, strerror(e));
        if ((size_t)n == sizeof(buf) - 1)
                return fp_errf(err, err_len, -EFBIG, "credentials file '%s' is over 8 KiB", path);
        buf[n] = 0;
        for (char *line = buf, *next; r == 0 && line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                line[strcspn(line, "\r")] = 0;
                r = cred_line(ret, path, ++lineno, line, err, err_len);
        }
        explicit_bzero(buf, sizeof(buf));
        if (r == 0 && !ret->bearer && !ret->user && !ret->tenant)
                r = fp_errf(err, err_len, -EINVAL,
                            "credentials file '%s' holds no bearer, basic or tenant line", path);
        if (r == -ENOMEM)
                fp_errf(err, err_len, r, "out of memory");
        if (r < 0)
                fp_wire_credentials_clear(ret);
        return r;
}

/* ---- the series of an upload ---- */

/* One series of an upload: a target's, or one service's of a host tier's round. */
struct groups;

struct group {
        const char *service, *exe, *container; /* the samples' labels (host tier) */
        const struct groups *all;
        size_t index;
};

struct groups {
        struct group *v;
        size_t n;
        size_t *of; /* each sample's group, by sample index */
};

static const char *label_str(const struct fp_pprof *p, size_t i, const char *key)
{
        struct fp_pprof_sample_view sv;
        struct fp_pprof_label l;

        if (fp_pprof_sample_get(p, i, &sv) < 0)
                return "";
        for (size_t j = 0; j < sv.n_labels; j++)
                if (fp_pprof_sample_label(p, i, j, &l) == 0 && l.str && strcmp(l.key, key) == 0)
                        return l.str;
        return "";
}

static bool in_group(const struct fp_pprof *p, size_t i, void *arg)
{
        const struct group *g = arg;

        (void)p;
        return g->all->of[i] == g->index;
}

static bool no_sample(const struct fp_pprof *p, size_t i, void *arg)
{
        (void)p;
        (void)i;
        (void)arg;
        return false;
}

/*
 * The distinct (service, exe, container) of a host tier round's samples, in
 * order of first use, and each sample's (read once: in_group() looks it up).
 */
static int host_groups(const struct fp_pprof *p, struct groups *g)
{
        g->of = malloc((fp_pprof_n_samples(p) + 1) * sizeof(*g->of));
        if (!g->of)
                return -ENOMEM;
        for (size_t i = 0; i < fp_pprof_n_samples(p); i++) {
                struct group x = {label_str(p, i, "service"), label_str(p, i, "exe"),
                                  label_str(p, i, "container"), g, g->n};
                size_t k;
                for (k = 0; k < g->n; k++)
                        if (!strcmp(g->v[k].service, x.service) && !strcmp(g->v[k].exe, x.exe) &&
                            !strcmp(g->v[k].container, x.container))
                                break;
                g->of[i] = k;
                if (k < g->n)
                        continue;
                if (g->n == MAX_GROUPS)
                        return -E2BIG;
                void *v = realloc(g->v, (g->n + 1) * sizeof(*g->v));
                if (!v)
                        return -ENOMEM;
                g->v = v;
                g->v[g->n++] = x;
        }
        return 0;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* A series' service: its own, else its executable's or process's name. */
static const char *group_service(const struct fp_upload_meta *m, const struct group *g)
{
        if (!g)
                return m->service[0] ? m->service : m->comm[0] ? m->comm : "unknown";
        return g->service[0] ? g->service : g->exe[0] ? base_name(g->exe) : "unknown";
}

/* Pyroscope's name for an event's profile type: the CPU clocks are its process_cpu. */
static const char *pyroscope_name(const char *event)
{
        return strcmp(event, "cpu-clock") == 0 || strcmp(event, "task-clock") == 0 ? "process_cpu"
                                                                                   : event;
}

/* ---- Pyroscope ---- */

static void label_pair(struct pbout *o, const char *name, const char *value)
{
        struct pbout l = {0};

        if (!value || !*value)
                return;
        out_str(&l, 1, name);
        out_str(&l, 2, value);
        out_msg(o, 1, &l);
        free(l.buf);
}

/* One RawProfileSeries: labels of the series (g NULL: the upload's target), the profile q. */
static int pyroscope_series(struct pbout *out, const struct fp_upload_meta *m,
                            const struct group *g, const char *service, struct fp_pprof *q,
                            const char *id)
{
        struct pbout s = {0}, raw = {0};
        uint8_t *body = NULL;
        size_t len = 0;
        char pid[24];
        int r = fp_pprof_encode(q, 1, &body, &len);

        if (r < 0)
                return r;
        label_pair(&s, "service_name", service);
        label_pair(&s, "__name__", pyroscope_name(m->event));
        label_pair(&s, "hostname", m->host);
        if (!g) {
                snprintf(pid, sizeof(pid), "%d", (int)m->pid);
                label_pair(&s, "pid", pid);
                label_pair(&s, "process", m->comm);
                label_pair(&s, "process.executable.path", m->exe);
                label_pair(&s, "container.id", m->container);
        } else {
                label_pair(&s, "process.executable.path", g->exe);
                label_pair(&s, "container.id", g->container);
        }
        out_len(&raw, 1, body, len);
        out_str(&raw, 2, id);
        out_msg(&s, 2, &raw);
        out_msg(out, 1, &s);
        r = s.oom || raw.oom ? -ENOMEM : 0;
        free(body);
        free(s.buf);
        free(raw.buf);
        return r;
}

/* The upload's drops, as comments of q. */
static int drop_comments(struct fp_pprof *q, const struct fp_upload_meta *m)
{
        char c[128];
        int r = 0;

        for (size_t i = 0; r >= 0 && i < m->n_drops; i++) {
                snprintf(c, sizeof(c), FP_UPLOAD_DROP_PREFIX "%s=%" PRIu64, m->drops[i].reason,
                         m->drops[i].count);
                r = fp_pprof_add_comment(q, c);
        }
        return r < 0 ? r : 0;
}

/* A profile with p's sample types and period and only the samples keep takes. */
static struct fp_pprof *cut(const struct fp_pprof *p, fp_pprof_keep_fn keep, void *arg)
{
        struct fp_pprof *q = fp_pprof_new();

        if (q && fp_pprof_merge_where(q, p, keep, arg) < 0) {
                fp_pprof_free(q);
                q = NULL;
        }
        return q;
}

static int pyroscope_body(const struct fp_upload_meta *m, const char *key, struct fp_pprof *p,
                          struct pbout *out)
{
        struct groups gs = {0};
        char id[FP_UPLOAD_MAX_KEY + 16];
        int r;

        if (!m->host_tier) {
                if ((r = drop_comments(p, m)) < 0)
                        return r;
                return pyroscope_series(out, m, NULL, group_service(m, NULL), p, key);
        }
        r = host_groups(p, &gs);
        for (size_t i = 0; r >= 0 && i < gs.n; i++) {
                struct fp_pprof *q = cut(p, in_group, &gs.v[i]);
                snprintf(id, sizeof(id), "%s.%zu", key, i);
                r = q ? pyroscope_series(out, m, &gs.v[i], group_service(m, &gs.v[i]), q, id)
                      : -ENOMEM;
                fp_pprof_free(q);
        }
        if (r >= 0 && m->n_drops) {
                struct fp_pprof *q = cut(p, no_sample, NULL);
                struct group tier = {"", "", "", NULL, 0};
                snprintf(id, sizeof(id), "%s.tier", key);
                r = q ? drop_comments(q, m) : -ENOMEM;
                if (r >= 0)
                        r = pyroscope_series(out, m, &tier, HOST_TIER_SERVICE, q, id);
                fp_pprof_free(q);
        }
        free(gs.v);
        free(gs.of);
        return r;
}

/* ---- OTLP ---- */

struct o_res {
        struct fp_otlp_attr attrs[7], drops[FP_UPLOAD_MAX_DROPS], event;
        char pid[24], drop_keys[FP_UPLOAD_MAX_DROPS][96];
};

static size_t put(struct fp_otlp_attr *a, size_t n, const char *key, const char *str)
{
        if (str && *str)
                a[n++] = (struct fp_otlp_attr){.key = key, .str = str};
        return n;
}

static size_t o_drops(struct o_res *o, const struct fp_upload_meta *m)
{
        for (size_t i = 0; i < m->n_drops; i++) {
                snprintf(o->drop_keys[i], sizeof(o->drop_keys[i]), FP_UPLOAD_DROP_PREFIX "%s",
                         m->drops[i].reason);
                o->drops[i] = (struct fp_otlp_attr){
                    .key = o->drop_keys[i],
                    .num = m->drops[i].count > INT64_MAX ? INT64_MAX : (int64_t)m->drops[i].count};
        }
        return m->n_drops;
}

static int otlp_body(const struct fp_upload_meta *m, struct fp_pprof *p, uint8_t **ret,
                     size_t *ret_len)
{
        static const char *const target_skip[] = {"pid",       "process", "host", "service",
                                                  "container", "exe",     NULL};
        static const char *const tier_skip[] = {"host", "service", "container", "exe", NULL};
        struct groups gs = {0};
        struct o_res *o = NULL;
        struct fp_otlp_resource *res = NULL;
        size_t n = 0;
        int r = 0;

        if (m->host_tier && (r = host_groups(p, &gs)) < 0)
                goto out;
        size_t cap = m->host_tier ? gs.n + 1 : 1;
        o = calloc(cap, sizeof(*o));
        res = calloc(cap, sizeof(*res));
        if (!o || !res) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < cap; i++) {
                const struct group *g = m->host_tier && i < gs.n ? &gs.v[i] : NULL;
                bool tier = m->host_tier && i == gs.n;
                size_t k = 0;
                if (tier && !m->n_drops)
                        break;
                k = put(o[i].attrs, k, "service.name",
                        tier ? HOST_TIER_SERVICE : group_service(m, g));
                k = put(o[i].attrs, k, "host.name", m->host);
                if (!m->host_tier) {
                        o[i].attrs[k++] =
                            (struct fp_otlp_attr){.key = "process.pid", .num = m->pid};
                        k = put(o[i].attrs, k, "process.executable.name", m->comm);
                        k = put(o[i].attrs, k, "process.executable.path", m->exe);
                        k = put(o[i].attrs, k, "container.id", m->container);
                } else if (g) {
                        k = put(o[i].attrs, k, "process.executable.path", g->exe);
                        k = put(o[i].attrs, k, "container.id", g->container);
                }
                o[i].event = (struct fp_otlp_attr){.key = "fleetprof.event", .str = m->event};
                res[n] = (struct fp_otlp_resource){
                    .attrs = o[i].attrs,
                    .n_attrs = k,
                    .keep = tier ? no_sample
                            : g  ? in_group
                                 : NULL,
                    .arg = (void *)g,
                    .profile_attrs = &o[i].event,
                    .n_profile_attrs = 1,
                    .drop_attrs = o[i].drops,
                    .n_drop_attrs = !m->host_tier || tier ? o_drops(&o[i], m) : 0};
                n++;
        }
        uint8_t *raw = NULL;
        size_t raw_len = 0;
        r = fp_pprof_to_otlp(p, res, n, m->host_tier ? tier_skip : target_skip, "fleetprof",
                             FP_VERSION, &raw, &raw_len);
        if (r >= 0)
                r = fp_pprof_gzip(raw, raw_len, ret, ret_len);
        free(raw);
out:
        free(o);
        free(res);
        free(gs.v);
        free(gs.of);
        return r;
}

int fp_wire_body(enum fp_wire w, const struct fp_upload_meta *m, const char *key,
                 const uint8_t *pprof, size_t len, uint8_t **ret, size_t *ret_len, char *err,
                 size_t err_len)
{
        struct fp_pprof *p = NULL;
        struct pbout out = {0};
        int r;

        *ret = NULL;
        *ret_len = 0;
        if (w == FP_WIRE_NATIVE)
                return fp_errf(err, err_len, -EINVAL, "the native body is the stored one");
        r = fp_pprof_decode(pprof, len, 0, &p, err, err_len);
        if (r < 0)
                return r;
        if (w == FP_WIRE_PYROSCOPE) {
                r = pyroscope_body(m, key, p, &out);
                if (r >= 0 && out.oom)
                        r = -ENOMEM;
                if (r >= 0) {
                        *ret = out.buf ? out.buf : malloc(1);
                        *ret_len = out.len;
                        out.buf = NULL;
                        r = *ret ? 0 : -ENOMEM;
                }
                free(out.buf);
        } else {
                r = otlp_body(m, p, ret, ret_len);
        }
        fp_pprof_free(p);
        if (r < 0)
                fp_errf(err, err_len, r, "cannot write the %s request: %s", fp_wire_name(w),
                        r == -E2BIG ? "over 4096 series in one round" : strerror(-r));
        return r;
}

size_t fp_wire_otlp_status(char *body, size_t len)
{
        struct pb c = {(const uint8_t *)body, (const uint8_t *)body + len}, msg = {0};
        uint32_t f;
        unsigned wt;
        uint64_t v;

        /* google.rpc.Status { int32 code = 1; string message = 2; repeated Any details = 3; } */
        while (c.p < c.end) {
                struct pb s = {0};
                if (pb_field(&c, &f, &wt, &v, &s) < 0)
                        return len;
                if (f == 2 && wt == WT_LEN)
                        msg = s;
        }
        if (!msg.p)
                return len;
        size_t n = (size_t)(msg.end - msg.p);
        memmove(body, msg.p, n);
        return n;
}

int64_t fp_wire_otlp_rejected(const uint8_t *body, size_t len, char *why, size_t why_len)
{
        struct pb c = {body, body + len};
        int64_t rejected = 0;

        if (why_len)
                why[0] = 0;
        while (c.p < c.end) {
                uint32_t f;
                unsigned wt;
                uint64_t v;
                struct pb ps = {0};
                if (pb_field(&c, &f, &wt, &v, &ps) < 0)
                        return 0;
                if (f != 1 || wt != WT_LEN)
                        continue;
                while (ps.p < ps.end) {
                        struct pb s = {0};
                        if (pb_field(&ps, &f, &wt, &v, &s) < 0)
                                return rejected;
                        if (f == 1 && wt == WT_VARINT)
                                rejected = (int64_t)v;
                        else if (f == 2 && wt == WT_LEN && why_len)
                                snprintf(why, why_len, "%.*s", (int)(s.end - s.p),
                                         (const char *)s.p);
                }
        }
        return rejected;
}
