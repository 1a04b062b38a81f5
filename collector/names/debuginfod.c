/* SPDX-License-Identifier: MIT */
/*
 * Names at the collector from debuginfod servers (see debuginfod.h).
 *
 * The table of builds: one entry per build a query queued (or an earlier
 * run cached), in a chained hash, each in one state:
 *
 *   NONE     never fetched, or evicted: the next query queues it
 *   DISK     cached by an earlier run, symbols not loaded: queued likewise
 *   QUEUED   in the fetcher's queue or being fetched
 *   READY    cached, symbols loaded (syms)
 *   FAILED   no server gave it; queued again after retry_at
 *
 * Only builds the fetcher was asked for have entries (a valid ID met by a
 * read, within the reads' quota of new builds): the table stays within
 * MAX_BUILDS, failures being forgotten first once it is full.
 *
 * The cache directory holds ID.debug (the debug file) and ID.head (the
 * executable's first bytes; empty when the server had the debug file
 * only: then only frames whose mapping says where its ELF addresses begin
 * are named) of each DISK or READY build, and .tmp-* files
 * while a download runs (removed at start). disk_bytes is their sum; the
 * fetcher evicts the least recently named builds past the budget.
 */
#include "debuginfod.h"
#include "dsyms.h"
#include "log.h"
#include "pprof.h"
#include "util.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ID_MAX         129 /* 64 bytes of hex and the NUL */
#define MAX_BUILDS     65536
#define QUEUE_MAX      4096
#define NEW_PER_READ   64 /* builds one read may queue: the rest wait for later reads */
#define WHY_MAX        200
#define CONNECT_MAX    10  /* seconds to connect, within the timeout */
#define REDIRECTS_MAX  3   /* hops within a server's own origin */
#define SAY_PER_MINUTE 20  /* failure lines; the rest are counted in one line */
#define DEADLINE_EVERY 256 /* locations named between looks at the read's deadline */
#define REFUSED_SAID   256 /* junk build IDs remembered as said (a fixed cost) */
#define SOURCES_SAID   64  /* builds a named profile's comments tell the source of */

enum state { NONE, DISK, QUEUED, READY, FAILED };

/* Where a build's names came from, besides a server's URL (struct entry's from). */
static const char UPLOADED[] = "an uploaded debug file";
static const char CACHED[] = "a debug file fetched before (the debuginfod cache)";

struct entry {
        char id[ID_MAX];
        enum state state;
        struct fp_dsyms *syms; /* READY */
        uint64_t disk_bytes;   /* DISK, READY */
        int64_t last_use_ns;   /* CLOCK_MONOTONIC (DISK from a run before: 0) */
        int64_t retry_ns;      /* FAILED */
        const char *from;      /* READY: where its file came from (UPLOADED or a server's URL) */
        struct entry *next;
};

struct fp_dbgi {
        struct fp_dbgi_config c;
        char **urls;
        char *dir;
        int dirfd;

        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t thread;
        bool started, stop;
        struct entry **tab;
        size_t cap, n;
        struct entry *queue[QUEUE_MAX];
        size_t q_head, q_len;
        uint64_t disk_bytes, cache_builds, symbol_bytes;
        struct fp_dbgi_stats st;
        int64_t say_since_ns; /* the minute failure lines are counted in */
        uint64_t said, unsaid;
        uint64_t refused_said[REFUSED_SAID]; /* hashes of junk IDs said, by their low bits */
};

/* ---- what the log says ---- */

/*
 * Under the lock: whether one more failure line may be logged now (at
 * most SAY_PER_MINUTE a minute, so that reads that meet thousands of
 * unknown builds cannot flood the log); the lines of a minute left unsaid
 * are counted in one line at the first failure after it.
 */
static bool may_say(struct fp_dbgi *d)
{
        int64_t now = (int64_t)fp_now_ns(CLOCK_MONOTONIC);

        if (now - d->say_since_ns >= 60 * 1000000000ll) {
                if (d->unsaid)
                        fp_log(LOG_WARNING,
                               "debuginfod: %" PRIu64 " more builds not named in the last minute "
                               "(not logged one by one; /metrics counts them)",
                               d->unsaid);
                d->say_since_ns = now;
                d->said = d->unsaid = 0;
        }
        if (d->said < SAY_PER_MINUTE) {
                d->said++;
                return true;
        }
        d->unsaid++;
        return false;
}

/*
 * What a log line may show of a string a client or a server chose: up to
 * max of its characters, each that is not a letter, a digit or one of
 * "-._:/" as '?', "..." after when cut. A build ID or a URL then never
 * writes a newline, an escape sequence or a forged line into the log.
 */
static const char *shown(const char *s, size_t max, char *buf, size_t len)
{
        size_t n = 0;

        for (; s[n] && n < max && n + 4 < len; n++)
                buf[n] = isalnum((unsigned char)s[n]) || strchr("-._:/", s[n]) ? s[n] : '?';
        snprintf(buf + n, len - n, "%s", s[n] ? "..." : "");
        return buf;
}

/* ---- the table ---- */

/* The chain of id in a table of cap (a power of two) chains. */
static size_t chain_of(const char *id, size_t cap)
{
        return (size_t)fp_fnv1a(FP_FNV1A_SEED, id, strlen(id)) & (cap - 1);
}

static struct entry *find(struct fp_dbgi *d, const char *id)
{
        if (!d->cap)
                return NULL;
        for (struct entry *e = d->tab[chain_of(id, d->cap)]; e; e = e->next)
                if (strcmp(e->id, id) == 0)
                        return e;
        return NULL;
}

/*
 * Under the lock, with the table full: forgets the builds it keeps only
 * as failures (FAILED) or as evicted (NONE), which a later read queues
 * again as it would a build never met.
 */
static void forget_failures(struct fp_dbgi *d)
{
        for (size_t i = 0; i < d->cap; i++) {
                for (struct entry **at = &d->tab[i]; *at;) {
                        struct entry *e = *at;
                        if (e->state == FAILED || e->state == NONE) {
                                *at = e->next;
                                free(e);
                                d->n--;
                        } else {
                                at = &e->next;
                        }
                }
        }
}

/* A new entry for id (lower-case, valid length), NULL when out of memory or full. */
static struct entry *add(struct fp_dbgi *d, const char *id)
{
        struct entry *e;

        if (d->n >= MAX_BUILDS)
                forget_failures(d);
        if (d->n >= MAX_BUILDS)
                return NULL;
        if (d->n + 1 > d->cap / 2) {
                size_t cap = d->cap ? 2 * d->cap : 1024;
                struct entry **tab = calloc(cap, sizeof(*tab));

                if (!tab)
                        return NULL;
                for (size_t i = 0; i < d->cap; i++) {
                        for (struct entry *x = d->tab[i], *nx; x; x = nx) {
                                size_t c = chain_of(x->id, cap);

                                nx = x->next;
                                x->next = tab[c];
                                tab[c] = x;
                        }
                }
                free(d->tab);
                d->tab = tab;
                d->cap = cap;
        }
        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        snprintf(e->id, sizeof(e->id), "%s", id);
        size_t c = chain_of(id, d->cap);
        e->next = d->tab[c];
        d->tab[c] = e;
        d->n++;
        return e;
}

int fp_dbgi_build_id_ok(const char *id, char *why, size_t whylen)
{
        size_t n = strlen(id);

        for (size_t i = 0; i < n; i++)
                if (!isxdigit((unsigned char)id[i]))
                        return fp_errf(why, whylen, 0, "is not hexadecimal");
        if (n % 2 || n < 16 || n > 128)
                return fp_errf(why, whylen, 0, "has %zu hex digits, not 16 to 128 in pairs", n);
        return 1;
}

/* ---- the cache directory ---- */

static void file_name(char *buf, size_t len, const char *id, const char *kind)
{
        snprintf(buf, len, "%s.%s", id, kind);
}

static void drop_files(struct fp_dbgi *d, struct entry *e)
{
        char name[ID_MAX + 16];

        if (!e->disk_bytes)
                return; /* an upload's: never on disk */
        file_name(name, sizeof(name), e->id, "debug");
        unlinkat(d->dirfd, name, 0);
        file_name(name, sizeof(name), e->id, "head");
        unlinkat(d->dirfd, name, 0);
        d->disk_bytes -= e->disk_bytes < d->disk_bytes ? e->disk_bytes : d->disk_bytes;
        d->cache_builds -= d->cache_builds ? 1 : 0;
        e->disk_bytes = 0;
}

/*
 * Under the lock: evicts least recently used builds (not keep) while the
 * files on disk, or the symbols loaded in memory, are past the budget.
 */
static void evict(struct fp_dbgi *d, const struct entry *keep)
{
        while (d->disk_bytes > d->c.cache_bytes || d->symbol_bytes > d->c.cache_bytes) {
                struct entry *old = NULL;

                for (size_t i = 0; i < d->cap; i++)
                        for (struct entry *e = d->tab[i]; e; e = e->next)
                                if (e != keep && (e->state == READY || e->state == DISK) &&
                                    (!old || e->last_use_ns < old->last_use_ns))
                                        old = e;
                if (!old)
                        return;
                drop_files(d, old);
                if (old->syms) {
                        d->symbol_bytes -= fp_dsyms_bytes(old->syms);
                        fp_dsyms_unref(old->syms);
                        old->syms = NULL;
                }
                old->state = NONE;
                d->st.evicted++;
        }
}

/*
 * Makes the directory path when missing: its missing parents 0755 (a
 * source build or a container has no /var/cache/fleetprof-collector), the
 * directory itself 0700. 0 or -errno.
 */
static int make_dirs(const char *path)
{
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = 0;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        return mkdir(p, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

/* Makes or checks the directory: ours, a real directory, no one else may write it. */
static int open_dir(struct fp_dbgi *d, char *err, size_t errlen)
{
        struct stat st;
        int r = make_dirs(d->dir);

        if (r < 0)
                return fp_errf(err, errlen, r, "cannot make the debuginfod cache %s: %s", d->dir,
                               strerror(-r));
        d->dirfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d->dirfd < 0)
                return fp_errf(err, errlen, -errno, "cannot open the debuginfod cache %s: %s",
                               d->dir, errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        if (fstat(d->dirfd, &st) < 0)
                return fp_errf(err, errlen, -errno, "cannot read the debuginfod cache %s: %s",
                               d->dir, strerror(errno));
        if (st.st_uid != geteuid() || (st.st_mode & 022))
                return fp_errf(err, errlen, -EPERM,
                               "the debuginfod cache %s is not ours alone (owner %u, mode %03o): "
                               "it must belong to the collector's user and be writable by no one "
                               "else",
                               d->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
        return 0;
}

/* What an earlier run cached: ID.debug with its ID.head. Leftover downloads go. */
static int index_dir(struct fp_dbgi *d)
{
        int fd = dup(d->dirfd);
        DIR *dir = fd < 0 ? NULL : fdopendir(fd);
        struct dirent *de;

        if (!dir) {
                if (fd >= 0)
                        close(fd);
                return -errno;
        }
        while ((de = readdir(dir))) {
                char id[ID_MAX], head[ID_MAX + 16];
                const char *dot = strrchr(de->d_name, '.');
                struct stat a, b;
                struct entry *e;
                size_t n = dot ? (size_t)(dot - de->d_name) : 0;

                if (strncmp(de->d_name, ".tmp-", 5) == 0) {
                        unlinkat(d->dirfd, de->d_name, 0);
                        continue;
                }
                if (!dot || strcmp(dot, ".debug") != 0 || n >= sizeof(id))
                        continue;
                memcpy(id, de->d_name, n);
                id[n] = '\0';
                file_name(head, sizeof(head), id, "head");
                if (fp_dbgi_build_id_ok(id, NULL, 0) <= 0 ||
                    fstatat(d->dirfd, de->d_name, &a, AT_SYMLINK_NOFOLLOW) < 0 ||
                    fstatat(d->dirfd, head, &b, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(a.st_mode) ||
                    !S_ISREG(b.st_mode) || find(d, id))
                        continue;
                e = add(d, id);
                if (!e)
                        break;
                e->state = DISK;
                e->disk_bytes = (uint64_t)a.st_size + (uint64_t)b.st_size;
                d->disk_bytes += e->disk_bytes;
                d->cache_builds++;
        }
        closedir(dir);
        evict(d, NULL);
        return 0;
}

/* ---- fetching ---- */

struct sink {
        int fd;           /* a file, or -1: into head */
        uint64_t n, max;  /* bytes taken; the most taken */
        uint8_t *head;    /* FP_DSYMS_HEAD_BYTES */
        bool full, error; /* the head is complete; a write failed */
};

static size_t take(char *p, size_t size, size_t nmemb, void *arg)
{
        struct sink *k = arg;
        size_t len = size * nmemb;

        if (k->fd < 0) {
                size_t room = FP_DSYMS_HEAD_BYTES - k->n;
                size_t m = len < room ? len : room;

                memcpy(k->head + k->n, p, m);
                k->n += m;
                if (k->n == FP_DSYMS_HEAD_BYTES) {
                        k->full = true;
                        return 0; /* enough: the rest is not needed */
                }
                return len;
        }
        if (len > k->max - k->n)
                return 0;
        if (fp_write_all(k->fd, p, len) < 0) {
                k->error = true;
                return 0;
        }
        k->n += len;
        return len;
}

/* Ends a transfer once the collector stops (fp_dbgi_free()). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
        const struct fp_dbgi *d = arg;

        (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
        return __atomic_load_n(&d->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

/* The length of url's origin: "scheme://host[:port]", without the path. */
static size_t origin_len(const char *url)
{
        const char *host = strstr(url, "://");

        host = host ? host + 3 : url;
        return (size_t)(host - url) + strcspn(host, "/?#");
}

/* Whether to is within from's origin (the same scheme, host and port, case aside). */
static bool same_origin(const char *from, const char *to)
{
        size_t n = origin_len(from);

        return origin_len(to) == n && strncasecmp(from, to, n) == 0;
}

/* Empties k for the next answer (a redirect's body went into it). */
static int sink_reset(struct sink *k)
{
        k->n = 0;
        k->full = false;
        if (k->fd >= 0 && (ftruncate(k->fd, 0) < 0 || lseek(k->fd, 0, SEEK_SET) < 0)) {
                k->error = true;
                return -1;
        }
        return 0;
}

/*
 * GET url/buildid/id/kind into k, following redirects only within url's
 * origin (a server that sends the collector elsewhere on its network is
 * not followed). 1 when it came (whole, or the head full), 0 when the
 * server has no such file (404), -1 with why otherwise.
 */
static int get(struct fp_dbgi *d, CURL *curl, const char *url, const char *id, const char *kind,
               struct sink *k, char *why, size_t whylen)
{
        char full[2048], errbuf[CURL_ERROR_SIZE] = "", show[80];
        size_t ul = strlen(url);
        long code = 0;
        CURLcode rc;

        while (ul && url[ul - 1] == '/')
                ul--;
        if (snprintf(full, sizeof(full), "%.*s/buildid/%s/%s", (int)ul, url, id, kind) >=
            (int)sizeof(full))
                return fp_errf(why, whylen, -1, "%s: the URL is too long", url);
        for (int hop = 0;; hop++) {
                char *next = NULL;

                curl_easy_reset(curl);
                curl_easy_setopt(curl, CURLOPT_URL, full);
                curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
                curl_easy_setopt(curl, CURLOPT_TIMEOUT, (long)d->c.timeout_s);
                curl_easy_setopt(
                    curl, CURLOPT_CONNECTTIMEOUT,
                    (long)(d->c.timeout_s < CONNECT_MAX ? d->c.timeout_s : CONNECT_MAX));
                curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L); /* followed below, or not */
#if LIBCURL_VERSION_NUM >= 0x075500
                curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
                curl_easy_setopt(curl, CURLOPT_USERAGENT, "fleetprof-collector");
                curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
                curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
                curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, take);
                curl_easy_setopt(curl, CURLOPT_WRITEDATA, k);
                curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
                curl_easy_setopt(curl, CURLOPT_XFERINFODATA, d);
                if (k->fd >= 0)
                        curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)k->max);
                rc = curl_easy_perform(curl);
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
                if (rc != CURLE_OK || code < 300 || code > 399 || code == 304)
                        break;
                if (curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &next) != CURLE_OK || !next)
                        return fp_errf(why, whylen, -1, "%s answered HTTP %ld for its %s", url,
                                       code, kind);
                if (!same_origin(url, next))
                        return fp_errf(why, whylen, -1,
                                       "%s redirected its %s to %s, off the server (not followed)",
                                       url, kind, shown(next, 60, show, sizeof(show)));
                if (hop == REDIRECTS_MAX)
                        return fp_errf(why, whylen, -1, "%s redirected its %s more than %d times",
                                       url, kind, REDIRECTS_MAX);
                if (snprintf(full, sizeof(full), "%s", next) >= (int)sizeof(full))
                        return fp_errf(why, whylen, -1, "%s redirected its %s to too long a URL",
                                       url, kind);
                if (sink_reset(k) < 0)
                        return fp_errf(why, whylen, -1, "cannot write into %s: %s", d->dir,
                                       strerror(errno));
        }
        if (rc == CURLE_WRITE_ERROR && k->full && code == 200)
                return 1;
        if (rc == CURLE_OK && code == 404)
                return 0;
        if (rc == CURLE_OK && code != 200)
                return fp_errf(why, whylen, -1, "%s answered HTTP %ld for its %s", url, code, kind);
        if (rc == CURLE_FILESIZE_EXCEEDED || (rc == CURLE_WRITE_ERROR && !k->error && k->fd >= 0))
                return fp_errf(why, whylen, -1,
                               "%s: its %s is larger than the cache (%" PRIu64 " bytes)", url, kind,
                               k->max);
        if (rc != CURLE_OK)
                return fp_errf(why, whylen, -1, "%s: %s", url,
                               *errbuf ? errbuf : curl_easy_strerror(rc));
        return 1;
}

/*
 * The symbols of build id from the debug file dir/debug_name and its
 * executable's first len bytes (head; len 0: no executable, the frames of
 * agents that say where their mappings begin named only): 0 with *ret, or
 * -1 with why.
 */
static int load_build(struct fp_dbgi *d, const char *id, const char *debug_name,
                      const uint8_t *head, size_t len, struct fp_dsyms **ret, char *why,
                      size_t whylen)
{
        struct fp_dsyms_seg segs[FP_DSYMS_MAX_SEGS];
        char path[4096];
        int n = len ? fp_dsyms_segments(head, len, segs, FP_DSYMS_MAX_SEGS, why, whylen) : 0;

        if (n < 0)
                return -1;
        snprintf(path, sizeof(path), "%s/%s", d->dir, debug_name);
        return fp_dsyms_load(path, id, segs, (size_t)n, ret, why, whylen) < 0 ? -1 : 0;
}

/*
 * Fetches id from url into the temporary files: 1 with *ret loaded, 0
 * when the server has no debug file for it, -1 with why.
 */
static int fetch_from(struct fp_dbgi *d, CURL *curl, const char *url, const char *id,
                      const char *tmp_debug, const char *tmp_head, struct fp_dsyms **ret,
                      uint64_t *ret_bytes, char *why, size_t whylen)
{
        _cleanup_free_ uint8_t *head = malloc(FP_DSYMS_HEAD_BYTES);
        char err[WHY_MAX];
        struct sink k = {.fd = -1, .max = d->c.cache_bytes};
        int r, fd;

        if (!head)
                return fp_errf(why, whylen, -1, "out of memory");
        k.fd = openat(d->dirfd, tmp_debug, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                      0640);
        if (k.fd < 0)
                return fp_errf(why, whylen, -1, "cannot write into %s: %s", d->dir,
                               strerror(errno));
        r = get(d, curl, url, id, "debuginfo", &k, why, whylen);
        if (k.error)
                r = fp_errf(why, whylen, -1, "cannot write into %s: %s", d->dir, strerror(errno));
        close(k.fd);
        if (r <= 0)
                return r;
        *ret_bytes = k.n;
        k = (struct sink){.fd = -1, .head = head};
        r = get(d, curl, url, id, "executable", &k, why, whylen);
        if (r < 0)
                return r;
        if (r == 0) /* a server of debug files only: the agents' mapping addresses suffice */
                k.n = 0;
        if (load_build(d, id, tmp_debug, head, k.n, ret, err, sizeof(err)) < 0)
                return fp_errf(why, whylen, -1, "%s: %s", url, err);
        /* (Empty without an executable: the build is cached all the same.) */
        fd =
            openat(d->dirfd, tmp_head, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd < 0 || (k.n && fp_write_all(fd, head, k.n) < 0)) {
                if (fd >= 0)
                        close(fd);
                fp_dsyms_unref(*ret);
                return fp_errf(why, whylen, -1, "cannot write into %s: %s", d->dir,
                               strerror(errno));
        }
        close(fd);
        *ret_bytes += k.n;
        return 1;
}

/* Loads a build cached by an earlier run: 0 with *ret, or -1 with why. */
static int load_cached(struct fp_dbgi *d, const char *id, struct fp_dsyms **ret, char *why,
                       size_t whylen)
{
        _cleanup_free_ uint8_t *head = malloc(FP_DSYMS_HEAD_BYTES);
        char name[ID_MAX + 16];
        _cleanup_close_ int fd = -1;
        ssize_t len;

        file_name(name, sizeof(name), id, "head");
        fd = openat(d->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (!head || fd < 0 || (len = read(fd, head, FP_DSYMS_HEAD_BYTES)) < 0)
                return fp_errf(why, whylen, -1, "its cached header cannot be read");
        file_name(name, sizeof(name), id, "debug");
        return load_build(d, id, name, head, (size_t)len, ret, why, whylen);
}

/*
 * The symbols of id from a file uploaded to the collector's store: 1 with
 * *ret, 0 when none was uploaded (or no store), -1 with why.
 */
static int from_upload(struct fp_dbgi *d, const char *id, struct fp_dsyms **ret, char *why,
                       size_t whylen)
{
        uint8_t *data = NULL;
        size_t len = 0;
        char err[WHY_MAX];
        int r;

        if (!d->c.uploads)
                return 0;
        r = d->c.uploads(d->c.uploads_arg, id, &data, &len, err, sizeof(err));
        if (r < 0)
                return fp_errf(why, whylen, -1, "its uploaded file cannot be read: %s", err);
        if (r == 0)
                return 0;
        r = fp_dsyms_load_mem(data, len, id, ret, err, sizeof(err));
        free(data);
        if (r < 0)
                return fp_errf(why, whylen, -1, "its uploaded file: %s", err);
        return 1;
}

/* One build: from the disk when cached, else uploads, else the servers. Without the lock. */
static void work(struct fp_dbgi *d, CURL *curl, struct entry *e, const char *id, bool cached)
{
        char why[WHY_MAX] = "", tmp_debug[ID_MAX + 16], tmp_head[ID_MAX + 16];
        char name[ID_MAX + 16];
        struct fp_dsyms *syms = NULL;
        uint64_t bytes = 0;
        size_t served_by = 0;
        bool upload_failed;
        int r = -1, missing = 0;

        if (cached && load_cached(d, id, &syms, why, sizeof(why)) == 0) {
                pthread_mutex_lock(&d->lock);
                e->state = READY;
                e->syms = syms;
                e->from = CACHED;
                d->symbol_bytes += fp_dsyms_bytes(syms);
                pthread_mutex_unlock(&d->lock);
                return;
        }
        if (cached) {
                fp_log(LOG_WARNING, "debuginfod: the cached build %s is dropped: %s", id, why);
                pthread_mutex_lock(&d->lock);
                drop_files(d, e);
                pthread_mutex_unlock(&d->lock);
        }
        if ((r = from_upload(d, id, &syms, why, sizeof(why))) > 0) {
                pthread_mutex_lock(&d->lock);
                e->state = READY;
                e->syms = syms;
                e->from = UPLOADED;
                e->last_use_ns = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
                d->symbol_bytes += fp_dsyms_bytes(syms);
                d->st.uploads_named++;
                evict(d, e);
                pthread_mutex_unlock(&d->lock);
                return;
        }
        upload_failed = r < 0;
        r = -1;
        snprintf(tmp_debug, sizeof(tmp_debug), ".tmp-%s.debug", id);
        snprintf(tmp_head, sizeof(tmp_head), ".tmp-%s.head", id);
        for (size_t i = 0; i < d->c.n_urls && r <= 0; i++) {
                char one[WHY_MAX];

                served_by = i;
                r = fetch_from(d, curl, d->urls[i], id, tmp_debug, tmp_head, &syms, &bytes, one,
                               sizeof(one));
                if (r == 0)
                        missing++;
                else if (r < 0)
                        snprintf(why, sizeof(why), "%s", one);
        }
        if (r > 0) {
                file_name(name, sizeof(name), id, "debug");
                if (renameat(d->dirfd, tmp_debug, d->dirfd, name) == 0) {
                        file_name(name, sizeof(name), id, "head");
                        if (renameat(d->dirfd, tmp_head, d->dirfd, name) < 0)
                                r = -1;
                } else {
                        r = -1;
                }
                if (r < 0) {
                        snprintf(why, sizeof(why), "cannot write into %s: %s", d->dir,
                                 strerror(errno));
                        file_name(name, sizeof(name), id, "debug"); /* no half build stays */
                        unlinkat(d->dirfd, name, 0);
                        fp_dsyms_unref(syms);
                        syms = NULL;
                }
        }
        unlinkat(d->dirfd, tmp_debug, 0);
        unlinkat(d->dirfd, tmp_head, 0);
        if (r <= 0 && !*why)
                snprintf(why, sizeof(why), "%s",
                         d->c.n_urls == 0   ? "no debug file of it was uploaded"
                         : d->c.n_urls == 1 ? "the server does not have it"
                                            : "no server has it");
        if (r <= 0 && __atomic_load_n(&d->stop, __ATOMIC_RELAXED))
                return; /* the collector stops: nothing kept, nothing to say */
        pthread_mutex_lock(&d->lock);
        /* Without servers, a build no one uploaded is the normal case: not said. */
        if (r <= 0 && (d->c.n_urls || upload_failed) && may_say(d))
                fp_log(LOG_WARNING,
                       "debuginfod: build %s not named: %s (asked again in %" PRIu64 " s)", id, why,
                       d->c.retry_s);
        if (r > 0) {
                e->state = READY;
                e->syms = syms;
                e->from = d->urls[served_by];
                e->disk_bytes = bytes;
                e->last_use_ns = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
                d->disk_bytes += bytes;
                d->cache_builds++;
                d->symbol_bytes += fp_dsyms_bytes(syms);
                d->st.fetched++;
                evict(d, e);
        } else {
                e->state = FAILED;
                e->retry_ns = (int64_t)(fp_now_ns(CLOCK_MONOTONIC) + d->c.retry_s * 1000000000ull);
                if (missing == (int)d->c.n_urls)
                        d->st.missing++;
                else
                        d->st.failed++;
        }
        pthread_mutex_unlock(&d->lock);
}

static void *fetcher(void *arg)
{
        struct fp_dbgi *d = arg;
        CURL *curl = curl_easy_init();

        pthread_mutex_lock(&d->lock);
        for (;;) {
                struct entry *e;
                char id[ID_MAX];
                bool cached;

                while (!d->stop && d->q_len == 0)
                        pthread_cond_wait(&d->wake, &d->lock);
                if (d->stop)
                        break;
                e = d->queue[d->q_head];
                d->q_head = (d->q_head + 1) % QUEUE_MAX;
                d->q_len--;
                snprintf(id, sizeof(id), "%s", e->id);
                cached = e->disk_bytes > 0;
                pthread_mutex_unlock(&d->lock);
                if (curl) {
                        work(d, curl, e, id, cached);
                } else {
                        pthread_mutex_lock(&d->lock);
                        e->state = FAILED;
                        e->retry_ns =
                            (int64_t)(fp_now_ns(CLOCK_MONOTONIC) + d->c.retry_s * 1000000000ull);
                        pthread_mutex_unlock(&d->lock);
                }
                pthread_mutex_lock(&d->lock);
        }
        pthread_mutex_unlock(&d->lock);
        curl_easy_cleanup(curl);
        return NULL;
}

/* ---- the collector's side ---- */

int fp_dbgi_new(const struct fp_dbgi_config *c, struct fp_dbgi **ret, char *err, size_t errlen)
{
        struct fp_dbgi *d = calloc(1, sizeof(*d));
        int r = -ENOMEM;

        if (!d)
                return fp_errf(err, errlen, -ENOMEM, "out of memory");
        d->c = *c;
        d->dirfd = -1;
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->wake, NULL);
        d->dir = c->n_urls ? strdup(c->cache_dir) : NULL; /* uploads only: nothing on disk */
        d->urls = calloc(c->n_urls + 1, sizeof(*d->urls));
        if ((c->n_urls && !d->dir) || !d->urls)
                goto fail;
        for (size_t i = 0; i < c->n_urls; i++) {
                if (strncmp(c->urls[i], "http://", 7) && strncmp(c->urls[i], "https://", 8)) {
                        r = fp_errf(err, errlen, -EINVAL,
                                    "debuginfod server '%s' is not an http:// or https:// URL",
                                    c->urls[i]);
                        goto fail;
                }
                if (!(d->urls[i] = strdup(c->urls[i])))
                        goto fail;
        }
        d->c.urls = NULL;
        d->c.cache_dir = NULL;
        if (d->dir && (r = open_dir(d, err, errlen)) < 0)
                goto fail;
        if (d->dir && (r = index_dir(d)) < 0) {
                fp_errf(err, errlen, r, "cannot read the debuginfod cache %s: %s", d->dir,
                        strerror(-r));
                goto fail;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = -pthread_create(&d->thread, NULL, fetcher, d);
        if (r < 0) {
                fp_errf(err, errlen, r, "cannot start the debuginfod fetcher: %s", strerror(-r));
                goto fail;
        }
        d->started = true;
        *ret = d;
        return 0;
fail:
        if (r == -ENOMEM)
                fp_errf(err, errlen, r, "out of memory");
        fp_dbgi_free(d);
        return r;
}

void fp_dbgi_free(struct fp_dbgi *d)
{
        if (!d)
                return;
        if (d->started) {
                pthread_mutex_lock(&d->lock);
                __atomic_store_n(&d->stop, true, __ATOMIC_RELAXED); /* on_progress reads it */
                pthread_cond_signal(&d->wake);
                pthread_mutex_unlock(&d->lock);
                pthread_join(d->thread, NULL);
        }
        for (size_t i = 0; i < d->cap; i++) {
                for (struct entry *e = d->tab[i], *nx; e; e = nx) {
                        nx = e->next;
                        fp_dsyms_unref(e->syms);
                        free(e);
                }
        }
        free(d->tab);
        for (size_t i = 0; d->urls && d->urls[i]; i++)
                free(d->urls[i]);
        free(d->urls);
        free(d->dir);
        if (d->dirfd >= 0)
                close(d->dirfd);
        pthread_mutex_destroy(&d->lock);
        pthread_cond_destroy(&d->wake);
        free(d);
}

/*
 * Under the lock: the symbols of raw_id (a new reference), or NULL after
 * queueing it when it is not cached and not backing off, and *quota (the
 * builds this read may still queue) allows. An ID that cannot be a build
 * ID is never asked for and takes no entry: a client's junk, however
 * long, leaves the table as it was and cannot stand for a real build.
 */
static struct fp_dsyms *lookup(struct fp_dbgi *d, const char *raw_id, int64_t now, size_t *quota,
                               const char **ret_from)
{
        char id[ID_MAX], why[WHY_MAX], show[64];
        struct entry *e;
        size_t n = strlen(raw_id);

        if (fp_dbgi_build_id_ok(raw_id, why, sizeof(why)) <= 0) {
                /* Said once (unless another took its place since): every read meets it. */
                uint64_t h = fp_fnv1a(FP_FNV1A_SEED, raw_id, n) | 1;
                uint64_t *said = &d->refused_said[h % REFUSED_SAID];
                if (*said == h)
                        return NULL;
                *said = h;
                d->st.failed++;
                if (may_say(d))
                        fp_log(LOG_WARNING, "debuginfod: build ID '%s' not asked for: it %s",
                               shown(raw_id, 40, show, sizeof(show)), why);
                return NULL;
        }
        for (size_t i = 0; i <= n; i++)
                id[i] = (char)tolower((unsigned char)raw_id[i]);
        e = find(d, id);
        if (!e && (!*quota || d->q_len == QUEUE_MAX || !(e = add(d, id)))) {
                d->st.misses++; /* asked for by a later read */
                return NULL;
        }
        switch (e->state) {
        case READY:
                e->last_use_ns = now;
                d->st.hits++;
                *ret_from = e->from;
                return fp_dsyms_ref(e->syms);
        case FAILED:
                if (now < e->retry_ns)
                        break;
                /* fall through */
        case NONE:
        case DISK:
                if (d->q_len == QUEUE_MAX || !*quota)
                        break;
                (*quota)--;
                e->state = QUEUED;
                d->queue[(d->q_head + d->q_len++) % QUEUE_MAX] = e;
                pthread_cond_signal(&d->wake);
                break;
        case QUEUED:
                break;
        }
        d->st.misses++;
        return NULL;
}

/* A build met by one naming pass, in its open-addressed table. */
struct pass_build {
        const char *id; /* the profile's string; NULL: a free slot */
        struct fp_dsyms *syms;
        const char *from; /* the entry's (lives as long as d) */
        const char *file; /* the first mapping of it named from, the profile's string */
        uint64_t named;   /* locations named from it */
};

/* Builds met by one naming pass, and the name given to each location. */
struct pass {
        struct fp_dbgi *d;
        int64_t now;
        size_t quota;              /* builds it may still queue (NEW_PER_READ) */
        struct pass_build *builds; /* cap_builds slots, a power of two */
        size_t n_builds, cap_builds;
        const char **names, **systems; /* [location id] */
};

static size_t pass_slot(const struct pass_build *t, size_t cap, const char *id)
{
        size_t i = (size_t)fp_fnv1a(FP_FNV1A_SEED, id, strlen(id)) & (cap - 1);

        while (t[i].id && t[i].id != id && strcmp(t[i].id, id) != 0)
                i = (i + 1) & (cap - 1);
        return i;
}

/* Whether the table has room for one more build (grown to keep it half empty). */
static bool pass_room(struct pass *ps)
{
        size_t cap = ps->cap_builds ? 2 * ps->cap_builds : 64;
        struct pass_build *t;

        if (2 * (ps->n_builds + 1) <= ps->cap_builds)
                return true;
        t = calloc(cap, sizeof(*t));
        if (!t)
                return false;
        for (size_t i = 0; i < ps->cap_builds; i++)
                if (ps->builds[i].id)
                        t[pass_slot(t, cap, ps->builds[i].id)] = ps->builds[i];
        free(ps->builds);
        ps->builds = t;
        ps->cap_builds = cap;
        return true;
}

static struct pass_build *pass_syms(struct pass *ps, const char *id)
{
        const char *from = NULL;
        struct fp_dsyms *s;
        size_t i;

        if (ps->cap_builds) {
                i = pass_slot(ps->builds, ps->cap_builds, id);
                if (ps->builds[i].id)
                        return ps->builds[i].syms ? &ps->builds[i] : NULL;
        }
        if (!pass_room(ps))
                return NULL;
        pthread_mutex_lock(&ps->d->lock);
        s = lookup(ps->d, id, ps->now, &ps->quota, &from);
        pthread_mutex_unlock(&ps->d->lock);
        i = pass_slot(ps->builds, ps->cap_builds, id);
        ps->builds[i].id = id;
        ps->builds[i].syms = s;
        ps->builds[i].from = from;
        ps->n_builds++;
        return s ? &ps->builds[i] : NULL;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');

        return s ? s + 1 : path;
}

/*
 * Whether the agent left v unnamed: no line, or the name it gives an
 * address it cannot name, FILE+0xOFFSET, for this very offset.
 */
static bool unnamed(const struct fp_pprof_location_view *v, uint64_t off)
{
        char want[512];

        if (v->n_lines == 0)
                return true;
        if (v->n_lines != 1 || !strstr(v->function_name, "+0x"))
                return false; /* most locations: named, no formatting needed */
        snprintf(want, sizeof(want), "%s+0x%" PRIx64, base_name(v->mapping_file), off);
        return strcmp(want, v->function_name) == 0;
}

static int give_name(const struct fp_pprof *src, uint64_t loc, void *arg, const char **ret_name,
                     const char **ret_system)
{
        struct pass *ps = arg;

        (void)src;
        if (!ps->names[loc])
                return 0;
        *ret_name = ps->names[loc];
        *ret_system = ps->systems[loc];
        return 1;
}

/*
 * What named what, in the profile's comments (go tool pprof -comments):
 * one line per build named here, at most SOURCES_SAID, then their count.
 */
static int say_sources(struct fp_pprof *out, const struct pass *ps)
{
        uint64_t more = 0;
        size_t said = 0;
        char line[512];

        for (size_t i = 0; i < ps->cap_builds; i++) {
                const struct pass_build *b = &ps->builds[i];

                if (!b->id || !b->named)
                        continue;
                if (said == SOURCES_SAID) {
                        more++;
                        continue;
                }
                snprintf(line, sizeof(line),
                         "fleetprof: %" PRIu64 " frame%s of %s (build %.16s...) named by the "
                         "collector from %s",
                         b->named, b->named == 1 ? "" : "s", b->file, b->id,
                         b->from == UPLOADED || b->from == CACHED ? b->from : "debuginfod server ");
                if (b->from != UPLOADED && b->from != CACHED)
                        snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s", b->from);
                if (fp_pprof_add_comment(out, line) < 0)
                        return -ENOMEM;
                said++;
        }
        if (more) {
                snprintf(line, sizeof(line),
                         "fleetprof: and %" PRIu64 " more builds named by the collector", more);
                if (fp_pprof_add_comment(out, line) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int fp_dbgi_name(struct fp_dbgi *d, struct fp_pprof **p, int64_t deadline_ns)
{
        struct pass ps = {
            .d = d, .now = (int64_t)fp_now_ns(CLOCK_MONOTONIC), .quota = NEW_PER_READ};
        size_t n = d ? fp_pprof_n_locations(*p) : 0, named = 0;
        struct fp_pprof *out = NULL;
        int r = 0;

        if (!n)
                return 0;
        ps.names = calloc(n + 1, sizeof(*ps.names));
        ps.systems = calloc(n + 1, sizeof(*ps.systems));
        if (!ps.names || !ps.systems) {
                r = -ENOMEM;
                goto out;
        }
        for (uint64_t id = 1; id <= n; id++) {
                struct fp_pprof_location_view v;
                struct pass_build *b;
                uint64_t off;

                if (deadline_ns && id % DEADLINE_EVERY == 0 &&
                    (int64_t)fp_now_ns(CLOCK_MONOTONIC) >= deadline_ns)
                        break; /* the read's time is up: the rest keep their offsets */
                if (fp_pprof_location_get(*p, id, &v) < 0 || !*v.build_id || !*v.mapping_file ||
                    v.address < v.mapping_start || v.address >= v.mapping_limit)
                        continue;
                off = v.address - v.mapping_start + v.mapping_offset;
                if (!unnamed(&v, off) || !(b = pass_syms(&ps, v.build_id)))
                        continue;
                /* The agent said where the mapping's ELF addresses begin: no segment needed. */
                ps.names[id] =
                    v.mapping_has_vaddr
                        ? fp_dsyms_name_at(b->syms, v.address - v.mapping_start + v.mapping_vaddr,
                                           &ps.systems[id])
                        : fp_dsyms_name(b->syms, off, &ps.systems[id]);
                if (ps.names[id]) {
                        named++;
                        b->named++;
                        if (!b->file)
                                b->file = v.mapping_file;
                }
        }
        if (named) {
                out = fp_pprof_new();
                r = out ? fp_pprof_merge_renamed(out, *p, give_name, &ps) : -ENOMEM;
                if (r == 0)
                        r = say_sources(out, &ps);
                if (r < 0) {
                        fp_pprof_free(out);
                        goto out;
                }
                fp_pprof_free(*p);
                *p = out;
                pthread_mutex_lock(&d->lock);
                d->st.frames_named += named;
                pthread_mutex_unlock(&d->lock);
        }
out:
        for (size_t i = 0; i < ps.cap_builds; i++)
                fp_dsyms_unref(ps.builds[i].syms);
        free(ps.builds);
        free(ps.names);
        free(ps.systems);
        return r;
}

int fp_dbgi_open_debug(struct fp_dbgi *d, const char *id, int *ret_fd, uint64_t *ret_size)
{
        char name[ID_MAX + 16];
        struct entry *e;
        struct stat st;
        int fd = -1, r = -ENOENT;

        if (!d || d->dirfd < 0 || strlen(id) >= ID_MAX || fp_dbgi_build_id_ok(id, NULL, 0) <= 0)
                return -ENOENT;
        pthread_mutex_lock(&d->lock);
        e = find(d, id);
        if (e && (e->state == READY || e->state == DISK)) {
                /* Opened under the lock: an eviction after it unlinks a file still read. */
                file_name(name, sizeof(name), id, "debug");
                fd = openat(d->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
                        e->last_use_ns = (int64_t)fp_now_ns(CLOCK_MONOTONIC);
                        *ret_fd = fd;
                        *ret_size = (uint64_t)st.st_size;
                        fd = -1;
                        r = 0;
                }
        }
        pthread_mutex_unlock(&d->lock);
        if (fd >= 0)
                close(fd);
        return r;
}

void fp_dbgi_uploaded(struct fp_dbgi *d, const char *id)
{
        struct entry *e;

        if (!d)
                return;
        pthread_mutex_lock(&d->lock);
        e = find(d, id);
        if (e && e->state == FAILED)
                e->retry_ns = 0; /* the next read that meets it queues it */
        pthread_mutex_unlock(&d->lock);
}

void fp_dbgi_stats(struct fp_dbgi *d, struct fp_dbgi_stats *ret)
{
        pthread_mutex_lock(&d->lock);
        *ret = d->st;
        ret->cache_bytes = d->disk_bytes;
        ret->cache_builds = d->cache_builds;
        ret->symbol_bytes = d->symbol_bytes;
        pthread_mutex_unlock(&d->lock);
}
