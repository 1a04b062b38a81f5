/* SPDX-License-Identifier: MIT */
/*
 * Labels from cgroup paths and executables; see labels.h for the rules.
 */
#include "labels.h"

#include <stdio.h>
#include <string.h>

static bool ends_with(const char *s, size_t n, const char *suffix)
{
        size_t k = strlen(suffix);
        return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool is_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* The container ID a component names (its first 12 digits into id), or false. */
static bool container_of(const char *c, size_t n, char id[16])
{
        static const char *const prefixes[] = {"docker-", "cri-containerd-", "crio-", "libpod-"};
        const char *hex = NULL;

        if (n == 64 && is_hex(c, 64)) {
                hex = c;
        } else if (ends_with(c, n, ".scope")) {
                for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                        size_t p = strlen(prefixes[i]);
                        if (n == p + 64 + 6 && memcmp(c, prefixes[i], p) == 0 &&
                            is_hex(c + p, 64)) {
                                hex = c + p;
                                break;
                        }
                }
        }
        if (!hex)
                return false;
        memcpy(id, hex, 12);
        id[12] = 0;
        return true;
}

void fp_labels_from_cgroup(const char *path, struct fp_labels *ret)
{
        char scope[FP_LABEL_MAX] = "";
        int depth = 0, unit_at = -1, scope_at = -1, container_at = -1;

        ret->unit[0] = 0;
        ret->container[0] = 0;
        for (const char *c = path; c && *c;) {
                while (*c == '/')
                        c++;
                size_t n = strcspn(c, "/");
                if (n == 0)
                        break;
                char id[16];
                if (container_of(c, n, id)) {
                        memcpy(ret->container, id, sizeof(id));
                        container_at = depth;
                } else if (n < FP_LABEL_MAX && ends_with(c, n, ".service")) {
                        memcpy(ret->unit, c, n);
                        ret->unit[n] = 0;
                        unit_at = depth;
                } else if (n < FP_LABEL_MAX && ends_with(c, n, ".scope")) {
                        memcpy(scope, c, n);
                        scope[n] = 0;
                        scope_at = depth;
                }
                c += n;
                depth++;
        }
        if (!ret->unit[0]) {
                memcpy(ret->unit, scope, sizeof(scope));
                unit_at = scope_at;
        }
        ret->container_inner = container_at > unit_at;
}

/*
 * Makes buf a name the upload contract takes (letters, digits, '.', '-',
 * '_', '@', ':'; never empty): anything else becomes '_'.
 */
static void sanitize(char *buf)
{
        char *c = buf;
        for (; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || strchr(".-_@:", *c)))
                        *c = '_';
        if (c == buf)
                strcpy(buf, "unknown");
}

void fp_labels_service(const struct fp_labels *l, const char *exe, const char *comm, bool kthread,
                       char *buf, size_t len)
{
        size_t n = strlen(l->unit);
        const char *deleted = " (deleted)";
        size_t ne = exe ? strlen(exe) : 0, nd = strlen(deleted);

        if (kthread) {
                snprintf(buf, len, "kernel");
        } else if (l->container[0] && (l->container_inner || !n)) {
                snprintf(buf, len, "%s", l->container);
        } else if (n && ends_with(l->unit, n, ".service")) {
                snprintf(buf, len, "%.*s", (int)(n - 8), l->unit);
        } else if (n) {
                snprintf(buf, len, "%s", l->unit);
        } else if (ne) {
                /* A file replaced or removed since it was run reads "PATH (deleted)". */
                if (ne > nd && strcmp(exe + ne - nd, deleted) == 0)
                        ne -= nd;
                const char *b = memrchr(exe, '/', ne);
                b = b ? b + 1 : exe;
                snprintf(buf, len, "%.*s", (int)(ne - (size_t)(b - exe)), b);
        } else {
                snprintf(buf, len, "%s", comm && *comm ? comm : "unknown");
        }
        sanitize(buf);
}
