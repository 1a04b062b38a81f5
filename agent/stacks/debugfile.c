/* SPDX-License-Identifier: MIT */
/*
 * Separate debug files and MiniDebugInfo; see debugfile.h.
 */
#include "debugfile.h"
#include "elfread.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define LINK_NAME_MAX 255 /* a debuglink's file name */

const char *fp_sym_source_name(enum fp_sym_source s)
{
        static const char *const names[FP_SYM_SOURCES] = {"dynsym",    "symtab",        "build_id",
                                                          "debuglink", "minidebuginfo", "pclntab"};
        return s < FP_SYM_SOURCES ? names[s] : "?";
}

void fp_debug_close(struct fp_debug_elf *d)
{
        if (d->elf)
                elf_end(d->elf);
        if (d->fd >= 0)
                close(d->fd);
        free(d->image);
        *d = (struct fp_debug_elf){.fd = -1};
}

/* The length of path's "/proc/PID/root" prefix (the target's mount namespace), or 0. */
static size_t root_prefix(const char *path)
{
        const char *p = path;
        if (strncmp(p, "/proc/", 6) != 0)
                return 0;
        p += 6;
        if (*p < '0' || *p > '9')
                return 0;
        while (*p >= '0' && *p <= '9')
                p++;
        return strncmp(p, "/root/", 6) == 0 ? (size_t)(p + 5 - path) : 0;
}

/* A candidate file opened under the rules of debugfile.h (its content checked by the caller). */
static int open_candidate(const char *path, uid_t owner, struct fp_debug_elf *ret)
{
        struct stat st;
        int fd;
        Elf *elf;

        /* No final symlink: a debug file is where the binary's owner put it, not elsewhere. */
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != owner) ||
            (st.st_mode & (S_IWGRP | S_IWOTH))) {
                close(fd);
                return -EPERM;
        }
        close(fd);
        /* Opened again as an ELF (the checks above on the same inode: O_NOFOLLOW again). */
        int r = fp_elf_open(path, &fd, &elf, NULL);
        if (r < 0)
                return r;
        struct stat again;
        if (fstat(fd, &again) < 0 || again.st_ino != st.st_ino || again.st_dev != st.st_dev) {
                elf_end(elf);
                close(fd);
                return -ESTALE;
        }
        *ret = (struct fp_debug_elf){.fd = fd, .elf = elf};
        return 0;
}

/* Whether d is the debug file of the binary with build_id (non-empty). */
static bool same_build(struct fp_debug_elf *d, const char *build_id)
{
        char bid[FP_ELF_BUILD_ID_HEX];
        fp_elf_build_id(d->elf, bid);
        return strcmp(bid, build_id) == 0;
}

/* The CRC-32 of fd's whole file (at most FP_DEBUG_CRC_MAX bytes); false past that or on error. */
static bool file_crc(int fd, uint32_t *ret)
{
        unsigned char buf[65536];
        uLong crc = crc32(0L, Z_NULL, 0);
        uint64_t total = 0;
        ssize_t n;

        while ((n = pread(fd, buf, sizeof(buf), (off_t)total)) > 0) {
                total += (uint64_t)n;
                if (total > FP_DEBUG_CRC_MAX)
                        return false;
                crc = crc32(crc, buf, (uInt)n);
        }
        if (n < 0)
                return false;
        *ret = (uint32_t)crc;
        return true;
}

/* elf's .gnu_debuglink: the file name into name (LINK_NAME_MAX + 1) and its CRC. */
static bool read_debuglink(Elf *elf, char *name, uint32_t *ret_crc)
{
        GElf_Shdr sh;
        Elf_Data *d = fp_elf_section(elf, ".gnu_debuglink", &sh);

        if (!d || !d->d_buf || d->d_size < 8)
                return false;
        const char *p = d->d_buf;
        size_t len = strnlen(p, d->d_size);
        size_t crc_off = (len + 4) & ~(size_t)3; /* the name, its NUL, padded to 4 */
        /* A name with a slash would leave the folders searched. */
        if (len == 0 || len > LINK_NAME_MAX || crc_off + 4 > d->d_size || strchr(p, '/'))
                return false;
        memcpy(name, p, len + 1);
        memcpy(ret_crc, p + crc_off, 4); /* the file's byte order: x86-64's */
        return true;
}

/* Tries one candidate: 1 and *ret when it is the binary's debug file. */
static int try_file(const char *path, uid_t owner, const char *build_id, bool by_crc, uint32_t crc,
                    struct fp_debug_elf *ret)
{
        struct fp_debug_elf d = {.fd = -1};
        uint32_t got;

        if (open_candidate(path, owner, &d) < 0)
                return 0;
        /* A file's build ID when the binary has one; else the CRC the debuglink holds. */
        if ((build_id[0] && same_build(&d, build_id)) ||
            (!build_id[0] && by_crc && file_crc(d.fd, &got) && got == crc)) {
                *ret = d;
                return 1;
        }
        fp_debug_close(&d);
        return 0;
}

int fp_debug_find(const char *path, Elf *elf, const char *build_id, const char *debug_dir,
                  uid_t owner, struct fp_debug_elf *ret, enum fp_sym_source *ret_source)
{
        size_t root = root_prefix(path);
        char cand[PATH_MAX + 64], link[LINK_NAME_MAX + 1];
        uint32_t crc = 0;

        /* 1. By build ID: the target's own debug directory, then the agent's. */
        if (strlen(build_id) >= 3) {
                const char *dirs[2] = {FP_DEBUG_DIR_DEFAULT, debug_dir};
                for (int i = 0; i < 2; i++) {
                        if (!dirs[i] || (i == 0 && !root))
                                continue;
                        snprintf(cand, sizeof(cand), "%.*s%s/.build-id/%.2s/%s.debug",
                                 i == 0 ? (int)root : 0, path, dirs[i], build_id, build_id + 2);
                        if (try_file(cand, owner, build_id, false, 0, ret)) {
                                *ret_source = FP_SYM_SOURCE_BUILD_ID;
                                return 1;
                        }
                }
        }
        /* 2. By debuglink: beside the binary, in its .debug/, under the debug directory. */
        if (!read_debuglink(elf, link, &crc))
                return 0;
        const char *slash = strrchr(path, '/');
        if (!slash || (size_t)(slash - path) > PATH_MAX)
                return 0;
        int dir_len = (int)(slash - path);
        const char *inner = path + root; /* the folder as the target sees it */
        int inner_len = dir_len - (int)root;
        char forms[3][PATH_MAX + 64];
        snprintf(forms[0], sizeof(forms[0]), "%.*s/%s", dir_len, path, link);
        snprintf(forms[1], sizeof(forms[1]), "%.*s/.debug/%s", dir_len, path, link);
        snprintf(forms[2], sizeof(forms[2]), "%.*s%s%.*s/%s", (int)root, path,
                 root ? FP_DEBUG_DIR_DEFAULT : (debug_dir ? debug_dir : FP_DEBUG_DIR_DEFAULT),
                 inner_len, inner, link);
        for (int i = 0; i < 3; i++) {
                /* Not the binary itself (a debuglink that names its own file). */
                if (strcmp(forms[i], path) == 0)
                        continue;
                if (try_file(forms[i], owner, build_id, true, crc, ret)) {
                        *ret_source = FP_SYM_SOURCE_DEBUGLINK;
                        return 1;
                }
        }
        return 0;
}

/* xz-decompresses in (n bytes) into a new buffer of at most FP_DEBUG_MINI_MAX bytes. */
static int unxz(const uint8_t *in, size_t n, uint8_t **ret, size_t *ret_len)
{
        lzma_stream s = LZMA_STREAM_INIT;
        size_t cap = n * 4 < 65536 ? 65536 : n * 4, len = 0;
        uint8_t *out = NULL;
        int r = 0;

        if (lzma_stream_decoder(&s, 2 * (uint64_t)FP_DEBUG_MINI_MAX, LZMA_CONCATENATED) != LZMA_OK)
                return -ENOMEM;
        s.next_in = in;
        s.avail_in = n;
        for (;;) {
                if (len == cap || !out) {
                        if (len == FP_DEBUG_MINI_MAX) {
                                r = -EFBIG;
                                break;
                        }
                        size_t want = !out ? cap : cap * 2;
                        if (want > FP_DEBUG_MINI_MAX)
                                want = FP_DEBUG_MINI_MAX;
                        uint8_t *p = realloc(out, want);
                        if (!p) {
                                r = -ENOMEM;
                                break;
                        }
                        out = p;
                        cap = want;
                }
                s.next_out = out + len;
                s.avail_out = cap - len;
                lzma_ret lr = lzma_code(&s, LZMA_FINISH);
                len = cap - s.avail_out;
                if (lr == LZMA_STREAM_END)
                        break;
                if (lr != LZMA_OK) {
                        r = lr == LZMA_MEM_ERROR ? -ENOMEM : -EBADMSG;
                        break;
                }
        }
        lzma_end(&s);
        if (r < 0) {
                free(out);
                return r;
        }
        *ret = out;
        *ret_len = len;
        return 0;
}

int fp_debug_minidebuginfo(Elf *elf, struct fp_debug_elf *ret)
{
        GElf_Shdr sh;
        Elf_Data *d = fp_elf_section(elf, ".gnu_debugdata", &sh);
        uint8_t *image;
        size_t len;

        if (!d || !d->d_buf || d->d_size == 0)
                return 0;
        int r = unxz(d->d_buf, d->d_size, &image, &len);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0; /* damaged or too large: the binary's own names stay */
        Elf *mini = elf_memory((char *)image, len);
        if (!mini || elf_kind(mini) != ELF_K_ELF) {
                if (mini)
                        elf_end(mini);
                free(image);
                return 0;
        }
        *ret = (struct fp_debug_elf){.fd = -1, .elf = mini, .image = image};
        return 1;
}
