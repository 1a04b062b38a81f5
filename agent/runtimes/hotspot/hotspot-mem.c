/* SPDX-License-Identifier: MIT */
/*
 * Bounded reads of a JVM's memory (process_vm_readv), for hotspot.c and
 * hotspot-code.c alike; see hotspot-internal.h. A read either has all its
 * bytes or fails: a JVM changes its memory while it is read, and may exit.
 */
#include "hotspot-internal.h"
#include "rtelf.h"

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
        return fp_rt_peek_cstr(pid, addr, buf, len) == 0; /* (a longer one: no name wanted) */
}
