/* SPDX-License-Identifier: MIT */
/* agentctl upload-debuginfo (upload-debuginfo.h): debug files sent to the collector from CI. */
#include "upload-debuginfo.h"
#include "elfread.h"
#include "util.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES  1000000 /* ELF files looked at in one run */
#define ANSWER_MAX 4096    /* bytes of a collector's answer kept (its one line) */
#define TIMEOUT_S  300L    /* one file sent */
#define CONNECT_S  10L

struct run {
        CURL *curl;
        const char *url; /* the collector's, no trailing slash */
        struct curl_slist *headers;
        char **seen; /* build IDs met this run */
        size_t n_seen, cap_seen;
        uint64_t uploaded, held, skipped, failed, bytes, files;
        char answer[ANSWER_MAX];
        size_t answer_len;
};

static struct run R; /* nftw's callback takes no argument */

static size_t take(char *p, size_t size, size_t n, void *arg)
{
        struct run *r = arg;
        size_t len = size * n, room = sizeof(r->answer) - 1 - r->answer_len;

        memcpy(r->answer + r->answer_len, p, len < room ? len : room);
        r->answer_len += len < room ? len : room;
        r->answer[r->answer_len] = 0;
        return len;
}

/* The collector's answer as one line: its error text, without the JSON around it. */
static const char *one_line(struct run *r)
{
        char *s = strstr(r->answer, "\"error\"");
        char *e;

        if (s) {
                s += 7;
                s += strspn(s, ": \t");
                s += *s == '"';
        } else {
                s = r->answer;
        }
        s[strcspn(s, "\r\n")] = 0;
        if ((e = strstr(s, "\"}")))
                *e = 0;
        return s;
}

/* HEAD or POST of /buildid/ID/debuginfo: the HTTP status, or -1 with why in r->answer. */
static long ask(struct run *r, const char *id, const void *data, size_t len)
{
        char url[4096], err[CURL_ERROR_SIZE] = "";
        long code = 0;
        CURLcode cr;

        snprintf(url, sizeof(url), "%s/buildid/%s/debuginfo", r->url, id);
        r->answer_len = 0;
        r->answer[0] = 0;
        curl_easy_reset(r->curl);
        curl_easy_setopt(r->curl, CURLOPT_URL, url);
        curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, r->headers);
        curl_easy_setopt(r->curl, CURLOPT_WRITEFUNCTION, take);
        curl_easy_setopt(r->curl, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(r->curl, CURLOPT_ERRORBUFFER, err);
        curl_easy_setopt(r->curl, CURLOPT_CONNECTTIMEOUT, CONNECT_S);
        curl_easy_setopt(r->curl, CURLOPT_TIMEOUT, TIMEOUT_S);
        curl_easy_setopt(r->curl, CURLOPT_NOSIGNAL, 1L);
        if (data) {
                curl_easy_setopt(r->curl, CURLOPT_POST, 1L);
                curl_easy_setopt(r->curl, CURLOPT_POSTFIELDS, data);
                curl_easy_setopt(r->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        } else {
                curl_easy_setopt(r->curl, CURLOPT_NOBODY, 1L);
        }
        cr = curl_easy_perform(r->curl);
        if (cr != CURLE_OK) {
                snprintf(r->answer, sizeof(r->answer), "%s", *err ? err : curl_easy_strerror(cr));
                return -1;
        }
        curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &code);
        return code;
}

static bool seen(struct run *r, const char *id)
{
        char *copy;

        for (size_t i = 0; i < r->n_seen; i++)
                if (strcmp(r->seen[i], id) == 0)
                        return true;
        if (fp_grow(&r->seen, &r->cap_seen, r->n_seen + 1, sizeof(*r->seen)) == 0 &&
            (copy = strdup(id)))
                r->seen[r->n_seen++] = copy;
        return false;
}

/* One file: 0 looked at (whatever became of it), or a negative value to stop the walk. */
static int one_file(const char *path)
{
        struct run *r = &R;
        char id[FP_ELF_BUILD_ID_HEX], magic[SELFMAG];
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        Elf *elf;
        bool symbols;
        void *map;
        long code;

        if (fd < 0)
                return 0;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || pread(fd, magic, SELFMAG, 0) != SELFMAG ||
            memcmp(magic, ELFMAG, SELFMAG) != 0) {
                close(fd);
                return 0; /* not an ELF file: not ours to mention */
        }
        if (++r->files > MAX_FILES) {
                close(fd);
                fprintf(stderr, "agentctl: more than %u ELF files: the rest not looked at\n",
                        MAX_FILES);
                return -1;
        }
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        *id = 0;
        symbols = false;
        if (elf && elf_kind(elf) == ELF_K_ELF) {
                fp_elf_build_id(elf, id);
                symbols = fp_elf_has_symtab(elf);
        }
        if (elf)
                elf_end(elf);
        if (!*id || !symbols) {
                printf("skipped   %s: %s\n", path,
                       !*id ? "no build ID" : "no symbol table (stripped)");
                r->skipped++;
                close(fd);
                return 0;
        }
        if (seen(r, id)) {
                printf("skipped   %s: build %s met before in this run\n", path, id);
                r->skipped++;
                close(fd);
                return 0;
        }
        code = ask(r, id, NULL, 0);
        if (code == 200) {
                printf("held      %s %s\n", id, path);
                r->held++;
                close(fd);
                return 0;
        }
        if (code != 404) {
                fprintf(stderr,
                        "agentctl: %s: the collector could not be asked about build %s: %s\n", path,
                        id,
                        code < 0      ? r->answer
                        : code == 401 ? "HTTP 401 (the write token?)"
                                      : one_line(r));
                r->failed++;
                close(fd);
                return code < 0 ? -1 : 0; /* a collector that cannot be reached: stop */
        }
        map =
            st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
        close(fd);
        if (map == MAP_FAILED) {
                fprintf(stderr, "agentctl: %s: cannot read it: %s\n", path, strerror(errno));
                r->failed++;
                return 0;
        }
        code = ask(r, id, map, (size_t)st.st_size);
        munmap(map, (size_t)st.st_size);
        if (code == 200) {
                printf("uploaded  %s %s (%" PRIu64 " bytes)\n", id, path, (uint64_t)st.st_size);
                r->uploaded++;
                r->bytes += (uint64_t)st.st_size;
                return 0;
        }
        fprintf(stderr, "agentctl: %s: not uploaded: %s\n", path,
                code < 0 ? r->answer : one_line(r));
        r->failed++;
        return code < 0 ? -1 : 0;
}

static int on_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        (void)ftw;
        if (type == FTW_F && S_ISREG(st->st_mode))
                return one_file(path);
        return 0;
}

static int usage(void)
{
        fprintf(stderr, "agentctl: usage: agentctl upload-debuginfo --collector URL "
                        "[--token-file FILE] PATH...\n");
        return 2;
}

int fp_ctl_upload_debuginfo(int argc, char **argv)
{
        const char *url = NULL, *token_file = NULL;
        _cleanup_free_ char *token = NULL, *base = NULL, *auth = NULL;
        char err[512];
        int i = 0, status = 0;
        int64_t t0 = (int64_t)fp_now_ns(CLOCK_MONOTONIC);

        for (; i < argc && argv[i][0] == '-'; i += 2) {
                if (i + 1 >= argc)
                        return usage();
                if (strcmp(argv[i], "--collector") == 0)
                        url = argv[i + 1];
                else if (strcmp(argv[i], "--token-file") == 0)
                        token_file = argv[i + 1];
                else {
                        fprintf(stderr, "agentctl: unknown option '%s' of upload-debuginfo\n",
                                argv[i]);
                        return 2;
                }
        }
        if (!url || i >= argc)
                return usage();
        if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
                fprintf(stderr, "agentctl: --collector '%s' is not an http:// or https:// URL\n",
                        url);
                return 2;
        }
        if (token_file && fp_read_token_file(token_file, &token, err, sizeof(err)) < 0) {
                fprintf(stderr, "agentctl: %s\n", err);
                return 2;
        }
        base = strdup(url);
        if (!base)
                return 1;
        for (size_t n = strlen(base); n && base[n - 1] == '/'; n--)
                base[n - 1] = 0;
        elf_version(EV_CURRENT);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        R = (struct run){.curl = curl_easy_init(), .url = base};
        R.headers = curl_slist_append(NULL, "Content-Type: application/octet-stream");
        R.headers = curl_slist_append(R.headers, "Expect:"); /* the body at once */
        if (token && asprintf(&auth, "Authorization: Bearer %s", token) > 0)
                R.headers = curl_slist_append(R.headers, auth);
        if (!R.curl || !R.headers || (token && !auth)) {
                fprintf(stderr, "agentctl: out of memory\n");
                return 1;
        }
        for (; i < argc && status == 0; i++) {
                struct stat st;

                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "agentctl: %s: %s\n", argv[i], strerror(errno));
                        R.failed++;
                        continue;
                }
                if (S_ISDIR(st.st_mode))
                        status = nftw(argv[i], on_entry, 32, FTW_PHYS) < 0 ? 1 : 0;
                else if (one_file(argv[i]) < 0)
                        status = 1;
        }
        printf("%" PRIu64 " uploaded (%" PRIu64 " bytes), %" PRIu64 " already held, %" PRIu64
               " skipped, %" PRIu64 " failed, in %.2f s\n",
               R.uploaded, R.bytes, R.held, R.skipped, R.failed,
               (double)((int64_t)fp_now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
        curl_slist_free_all(R.headers);
        curl_easy_cleanup(R.curl);
        for (size_t k = 0; k < R.n_seen; k++)
                free(R.seen[k]);
        free(R.seen);
        return R.failed ? 1 : status;
}
