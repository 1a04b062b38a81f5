/* SPDX-License-Identifier: MIT */
/*
 * Names at the collector: frames the agent could not name (an address in
 * a stripped binary, which it stores as FILE+0xOFFSET with its mapping's
 * build ID) are named from the build's debug file: one uploaded to the
 * collector's store (the uploads callback: debugfiles.h), else one fetched
 * from debuginfod servers (--debuginfod URL, else DEBUGINFOD_URLS as
 * elfutils' tools read it), once per build for the whole fleet. An upload
 * is loaded from memory, never written to the cache directory; a build
 * uploaded after a read met it is asked for at once (fp_dbgi_uploaded()),
 * one uploaded through another collector of the store after the back-off.
 * A profile that was named says, in its comments, which builds were named
 * and from what.
 *
 * A query never waits for a server: fp_dbgi_name() names what the cache
 * holds now and asks the fetcher thread for the builds it lacks, so the
 * next query names those too. The fetcher asks each server in turn for
 * /buildid/ID/debuginfo and the first 64 KiB of /buildid/ID/executable
 * (its program headers: where the file's bytes lie in memory), checks
 * that the debug file is an ELF file of that build with function symbols,
 * and keeps both in the cache directory under a byte budget, the least
 * recently used build evicted first; its symbols stay loaded while it is
 * cached. A build no server gave (missing, an error, a hang past the
 * timeout, a file that is not what it says) is asked for again only after
 * the back-off (--debuginfod-retry); a build ID that cannot be one (not
 * hex, not 8-64 bytes) is never asked for and takes no entry. Each
 * failure is one log line, at most 20 a minute (the rest counted in one
 * line), with what a client or server chose shown as safe characters. A
 * server's redirects are followed only within its own origin (scheme,
 * host and port), at most 3.
 *
 * Bounds: one read queues at most 64 builds it has not met (later reads
 * queue the rest) and names until its deadline; the table of builds holds
 * at most 65,536, forgetting failures first; a debug file's names may take
 * at most four times its size and 1 MiB in memory, and the loaded symbols of
 * all builds at most the cache's budget (least recently named unloaded
 * and evicted first), beside the disk's.
 *
 * Threads: fp_dbgi_name() runs on the reader thread (a read's naming),
 * fp_dbgi_stats() on the reader or the loop thread, the fetcher on its
 * own; they share the table of builds under a mutex held only for table
 * updates, never across a download or a parse.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct fp_pprof;
struct fp_dbgi;

struct fp_dbgi_config {
        const char *const *urls; /* servers, tried in order */
        size_t n_urls;
        const char *cache_dir; /* created (0700) when missing; must be ours alone; unused
                                  without servers (uploads are named from memory) */
        uint64_t cache_bytes;  /* the disk budget; also the largest file taken */
        uint64_t timeout_s;    /* one request, connection to last byte */
        uint64_t retry_s;      /* a failed build is asked for again after this */
        /*
         * Files uploaded to the collector, asked before any server (NULL:
         * none): 1 with id's bytes (*data malloc'd), 0 when none was
         * uploaded, -errno with one line in err. On the fetcher thread.
         */
        int (*uploads)(void *arg, const char *id, uint8_t **data, size_t *len, char *err,
                       size_t errlen);
        void *uploads_arg;
};

struct fp_dbgi_stats {
        uint64_t fetched, missing, failed; /* builds fetched; no server had; errors or refused */
        uint64_t hits, misses;             /* a query's build: cached, or not (yet) */
        uint64_t frames_named;             /* locations named */
        uint64_t uploads_named;            /* builds loaded from uploaded files */
        uint64_t cache_bytes, cache_builds, symbol_bytes, evicted;
};

/*
 * Checks (or creates) the cache directory, indexes what it holds and
 * starts the fetcher. -errno with one line in err.
 */
int fp_dbgi_new(const struct fp_dbgi_config *c, struct fp_dbgi **ret, char *err, size_t errlen);
/* Stops the fetcher at once (a download under way is abandoned). Accepts NULL. */
void fp_dbgi_free(struct fp_dbgi *d);

/*
 * Names what the cache can name of *p: when it names any location, *p is
 * replaced by a new profile (the old one freed) whose named locations
 * have one line each, demangled, the symbol as system name. Builds not
 * cached are queued. Naming stops at CLOCK_MONOTONIC deadline_ns (0:
 * none), the locations left keeping their offsets. d NULL: nothing. 0, or
 * -ENOMEM (*p unchanged).
 */
int fp_dbgi_name(struct fp_dbgi *d, struct fp_pprof **p, int64_t deadline_ns);

void fp_dbgi_stats(struct fp_dbgi *d, struct fp_dbgi_stats *ret);

/* Build id (lower-case hex) was just uploaded: a read that meets it asks at once. NULL: nothing. */
void fp_dbgi_uploaded(struct fp_dbgi *d, const char *id);

/*
 * Whether id is a build ID worth asking for: lower-case or upper-case
 * hex of 8 to 64 bytes. Else false with why ("12 hex digits, ...").
 */
int fp_dbgi_build_id_ok(const char *id, char *why, size_t whylen);

/*
 * The debug file of build id (lower-case hex) as the cache holds it, for
 * the collector's own debuginfod answers: 0 with an open descriptor and
 * its size, -ENOENT when it holds none (never fetched, failed, evicted).
 */
int fp_dbgi_open_debug(struct fp_dbgi *d, const char *id, int *ret_fd, uint64_t *ret_size);
