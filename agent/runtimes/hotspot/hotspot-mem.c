/* SPDX-License-Identifier: MIT */
/*
 * Bounded reads of a JVM's memory (process_vm_readv), for hotspot.c and
 * hotspot-code.c alike; see hotspot-internal.h. A read either has all its
 * bytes or fails: a JVM changes its memory while it is read, and may exit.
 */
#include "hotspot-internal.h"

#include <string.h>
#include <sys/uio.h>

bool fp_hotspot_peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
        struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};

        return addr && process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

bool fp_hotspot_peek_u64(pid_t pid, uint64_t addr, uint64_t *ret)
{
        return fp_hotspot_peek(pid, addr, ret, sizeof(*ret));
}

bool fp_hotspot_peek_cstr(pid_t pid, uint64_t addr, char *buf, size_t len)
{
        size_t n = 0;

        while (n + 1 < len) {
                size_t chunk = 4096 - ((addr + n) & 4095);
                if (chunk > len - 1 - n)
                        chunk = len - 1 - n;
                if (!fp_hotspot_peek(pid, addr + n, buf + n, chunk))
                        return false;
                void *nul = memchr(buf + n, 0, chunk);
                if (nul)
                        return true;
                n += chunk;
        }
        buf[len - 1] = 0;
        return false; /* longer than any name wanted */
}
