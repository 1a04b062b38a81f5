/* SPDX-License-Identifier: MIT */
/*
 * collector-bench: load generator for fleetprof-collector.
 *
 *   collector-bench --url URL --profile FILE... [--token-file FILE] [--cacert FILE]
 *                   [--concurrency N] [--uploads N] [--get PATH] [--run-id ID]
 *                   [--protocol native|pyroscope|connect|otlp] [--key-salt S]
 *
 * N simulated agents (--concurrency) each send uploads one after another,
 * over libcurl's multi interface on one thread, until --uploads requests
 * were made in all. Agent i is host "bench-ID-i", pid 1000 + i; its k-th
 * upload covers the minute [k, k+1) after 2026-01-01 and carries a unique
 * Idempotency-Key (ending in --key-salt, so that the same uploads sent
 * again with another salt are stored again), so every upload is stored. With several --profile
 * FILEs (up to 64) the uploads take them in turn (agent i's k-th upload
 * sends file (i + k) mod n), so that stores see different profiles, as
 * from a real fleet, rather than one repeated. With --get PATH it GETs
 * URL/PATH instead (the trivial-request peer, e.g. /healthz), at the same
 * concurrency. --protocol sends the same profiles as Pyroscope's SDKs do
 * (POST /ingest?name=bench-ID-i{hostname=...}&from&until&format=pprof) or
 * as Pyroscope's Connect push (a PushRequest of one series holding the
 * profile, its sample ID unique), or (otlp) sends each --profile FILE,
 * an ExportProfilesServiceRequest (tests/bench/pprof2otlp.py), to
 * /v1development/profiles gzipped, instead of the agents' contract.
 * Prints one line of key=value figures:
 *
 *   mode=ingest concurrency=8 requests=640 ok=640 failed=0 seconds=0.91
 *   rate=703.3 p50_ms=10.2 p99_ms=31.0 max_ms=40.1 body_bytes=2590 status_2xx=640
 *
 * Exit status 0 when every request got a 2xx, 1 otherwise (the load test
 * checks it; the benchmark script reports the figures).
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

struct agent {
        int index;
        unsigned seq;
        CURL *easy;
        struct curl_slist *headers;
        double started;
        char *push; /* --protocol connect: this request's PushRequest */
        size_t push_len;
};

static struct {
        const char *url, *profile[64], *token_file, *cacert, *get, *run_id, *protocol, *key_salt;
        unsigned concurrency, uploads, n_profiles;
        char *body[64];
        size_t body_len[64];
        char *token;
} opt = {.concurrency = 8, .uploads = 200, .run_id = "r", .protocol = "native", .key_salt = ""};

static double *latencies;
static unsigned n_started, n_done, n_ok, n_failed, status_counts[6];
static uint64_t bytes_sent; /* request bodies */

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        char *buf = NULL;
        size_t len = 0, cap = 0, n;

        if (!f)
                return -errno;
        for (;;) {
                if (len == cap) {
                        cap = cap ? cap * 2 : 65536;
                        char *p = realloc(buf, cap + 1);
                        if (!p) {
                                free(buf);
                                fclose(f);
                                return -ENOMEM;
                        }
                        buf = p;
                }
                n = fread(buf + len, 1, cap - len, f);
                if (n == 0)
                        break;
                len += n;
        }
        fclose(f);
        buf[len] = 0;
        *ret = buf;
        *ret_len = len;
        return 0;
}

static size_t discard(char *d, size_t size, size_t nmemb, void *u)
{
        (void)d;
        (void)u;
        return size * nmemb;
}

/* Appends a protobuf varint. */
static size_t put_varint(char *out, uint64_t v)
{
        size_t n = 0;
        do {
                out[n] = (char)(v & 0x7f);
                v >>= 7;
                if (v)
                        out[n] |= (char)0x80;
                n++;
        } while (v);
        return n;
}

/* Field f (length-delimited) of n bytes at out: its tag and length; returns the bytes written. */
static size_t put_len(char *out, unsigned f, size_t n)
{
        size_t k = put_varint(out, (uint64_t)f << 3 | 2);
        return k + put_varint(out + k, n);
}

/*
 * The agent's PushRequest of profile (len bytes): one series (labels
 * service_name, hostname, __name__) holding one raw sample with an ID
 * unique to this request. Into a->push; returns its length.
 */
static size_t connect_push(struct agent *a, const char *profile, size_t len)
{
        char labels[3][2][64], id[64], *series, *out;
        size_t n = 0, sn = 0;

        snprintf(labels[0][0], 64, "service_name");
        snprintf(labels[0][1], 64, "bench-%s-%d", opt.run_id, a->index);
        snprintf(labels[1][0], 64, "hostname");
        snprintf(labels[1][1], 64, "bench-%s-%d", opt.run_id, a->index);
        snprintf(labels[2][0], 64, "__name__");
        snprintf(labels[2][1], 64, "process_cpu");
        snprintf(id, sizeof(id), "bench-%s-%d-%u", opt.run_id, a->index, a->seq);
        series = malloc(len + 1024);
        out = realloc(a->push, len + 1100);
        if (!series || !out) {
                fprintf(stderr, "collector-bench: out of memory\n");
                exit(2);
        }
        a->push = out;
        for (int i = 0; i < 3; i++) {
                size_t kn = strlen(labels[i][0]), vn = strlen(labels[i][1]);
                char tmp[160];
                size_t t = put_len(tmp, 1, kn);
                memcpy(tmp + t, labels[i][0], kn);
                t += kn;
                t += put_len(tmp + t, 2, vn);
                memcpy(tmp + t, labels[i][1], vn);
                t += vn;
                sn += put_len(series + sn, 1, t);
                memcpy(series + sn, tmp, t);
                sn += t;
        }
        /* RawSample{raw_profile = 1, ID = 2} as field 2 of the series. */
        size_t idn = strlen(id);
        char head[32];
        size_t sample_len = put_len(head, 1, len) + len + put_len(head, 2, idn) + idn;
        sn += put_len(series + sn, 2, sample_len);
        sn += put_len(series + sn, 1, len);
        memcpy(series + sn, profile, len);
        sn += len;
        sn += put_len(series + sn, 2, idn);
        memcpy(series + sn, id, idn);
        sn += idn;
        n = put_len(out, 1, sn);
        memcpy(out + n, series, sn);
        n += sn;
        free(series);
        a->push_len = n;
        return n;
}

/*
 * The agent's OTLP request: the file's ExportProfilesServiceRequest
 * (tests/bench/pprof2otlp.py) with an unknown field 15 naming this
 * request (so that none is a duplicate of another), gzip-compressed as
 * OpenTelemetry's exporters send it. Into a->push; returns its length.
 */
static size_t otlp_request(struct agent *a, const char *request, size_t len)
{
        char id[64], *raw = malloc(len + 96), *out;
        size_t n = len, idn;
        z_stream z = {0};

        snprintf(id, sizeof(id), "bench-%s-%d-%u", opt.run_id, a->index, a->seq);
        idn = strlen(id);
        if (!raw || deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
                fprintf(stderr, "collector-bench: out of memory\n");
                exit(2);
        }
        memcpy(raw, request, len);
        n += put_len(raw + n, 15, idn);
        memcpy(raw + n, id, idn);
        n += idn;
        size_t cap = deflateBound(&z, n) + 32;
        if (!(out = realloc(a->push, cap))) {
                fprintf(stderr, "collector-bench: out of memory\n");
                exit(2);
        }
        a->push = out;
        z.next_in = (Bytef *)raw;
        z.avail_in = (uInt)n;
        z.next_out = (Bytef *)out;
        z.avail_out = (uInt)cap;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
                fprintf(stderr, "collector-bench: cannot compress\n");
                exit(2);
        }
        a->push_len = cap - z.avail_out;
        deflateEnd(&z);
        free(raw);
        return a->push_len;
}

/* Starts the agent's next request. */
static void start(CURLM *multi, struct agent *a)
{
        char url[1024], hdr[512];
        /* 2026-01-01T00:00:00Z: uploads are minutes after it. */
        const int64_t base_ns = 1767225600LL * 1000000000LL;
        int64_t from = base_ns + (int64_t)a->seq * 60 * 1000000000LL;

        curl_easy_reset(a->easy);
        curl_slist_free_all(a->headers);
        a->headers = NULL;
        if (opt.get) {
                snprintf(url, sizeof(url), "%s%s", opt.url, opt.get);
        } else if (strcmp(opt.protocol, "native") != 0) {
                unsigned k = ((unsigned)a->index + a->seq) % opt.n_profiles;
                const char *body = opt.body[k];
                size_t len = opt.body_len[k];
                if (strcmp(opt.protocol, "otlp") == 0) {
                        len = otlp_request(a, opt.body[k], opt.body_len[k]);
                        body = a->push;
                        snprintf(url, sizeof(url), "%s/v1development/profiles", opt.url);
                        a->headers =
                            curl_slist_append(a->headers, "Content-Type: application/x-protobuf");
                        a->headers = curl_slist_append(a->headers, "Content-Encoding: gzip");
                } else if (strcmp(opt.protocol, "connect") == 0) {
                        len = connect_push(a, opt.body[k], opt.body_len[k]);
                        body = a->push;
                        snprintf(url, sizeof(url), "%s/push.v1.PusherService/Push", opt.url);
                        a->headers =
                            curl_slist_append(a->headers, "Content-Type: application/proto");
                } else {
                        snprintf(url, sizeof(url),
                                 "%s/ingest?name=bench-%s-%d%%7Bhostname%%3Dbench-%s-%d%%7D"
                                 "&from=%" PRId64 "&until=%" PRId64 "&format=pprof&spyName=bench",
                                 opt.url, opt.run_id, a->index, opt.run_id, a->index,
                                 (int64_t)(from / 1000000000LL),
                                 (int64_t)(from / 1000000000LL + 60));
                        a->headers =
                            curl_slist_append(a->headers, "Content-Type: application/octet-stream");
                }
                a->headers = curl_slist_append(a->headers, "Expect:");
                if (opt.token) {
                        snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", opt.token);
                        a->headers = curl_slist_append(a->headers, hdr);
                }
                curl_easy_setopt(a->easy, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(a->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
                bytes_sent += len;
                curl_easy_setopt(a->easy, CURLOPT_HTTPHEADER, a->headers);
        } else {
                snprintf(url, sizeof(url),
                         "%s/api/v1/ingest?host=bench-%s-%d&pid=%d&starttime=1&comm=bench&exe="
                         "/usr/bin/bench&event=cpu-clock&from=%" PRId64 "&to=%" PRId64
                         "&agent=bench&drops=throttled:1",
                         opt.url, opt.run_id, a->index, 1000 + a->index, from,
                         (int64_t)(from + 60 * 1000000000LL));
                snprintf(hdr, sizeof(hdr), "Idempotency-Key: bench-%s-%d-%u%s", opt.run_id,
                         a->index, a->seq, opt.key_salt);
                a->headers = curl_slist_append(a->headers, hdr);
                a->headers = curl_slist_append(a->headers, "Expect:");
                a->headers =
                    curl_slist_append(a->headers, "Content-Type: application/octet-stream");
                if (opt.token) {
                        snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", opt.token);
                        a->headers = curl_slist_append(a->headers, hdr);
                }
                unsigned k = ((unsigned)a->index + a->seq) % opt.n_profiles;
                curl_easy_setopt(a->easy, CURLOPT_POSTFIELDS, opt.body[k]);
                curl_easy_setopt(a->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)opt.body_len[k]);
                bytes_sent += opt.body_len[k];
                curl_easy_setopt(a->easy, CURLOPT_HTTPHEADER, a->headers);
        }
        curl_easy_setopt(a->easy, CURLOPT_URL, url);
        curl_easy_setopt(a->easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(a->easy, CURLOPT_PRIVATE, a);
        curl_easy_setopt(a->easy, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(a->easy, CURLOPT_NOSIGNAL, 1L);
        if (opt.cacert)
                curl_easy_setopt(a->easy, CURLOPT_CAINFO, opt.cacert);
        a->seq++;
        a->started = now_s();
        n_started++;
        curl_multi_add_handle(multi, a->easy);
}

static int cmp_double(const void *x, const void *y)
{
        double a = *(const double *)x, b = *(const double *)y;
        return a < b ? -1 : a > b;
}

static void usage(FILE *f)
{
        fprintf(
            f,
            "Usage: collector-bench --url URL --profile FILE... [--token-file FILE]\n"
            "                       [--cacert FILE] [--concurrency N] [--uploads N]\n"
            "                       [--get PATH] [--run-id ID]\n"
            "                       [--protocol native|pyroscope|connect|otlp] [--key-salt S]\n");
}

int main(int argc, char **argv)
{
        struct agent *agents;
        CURLM *multi;
        double t0, t1;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (strcmp(a, "--help") == 0) {
                        usage(stdout);
                        return 0;
                }
                if (!v) {
                        fprintf(stderr, "collector-bench: option '%s' needs a value\n", a);
                        return 2;
                }
                i++;
                if (strcmp(a, "--url") == 0)
                        opt.url = v;
                else if (strcmp(a, "--profile") == 0 && opt.n_profiles < 64)
                        opt.profile[opt.n_profiles++] = v;
                else if (strcmp(a, "--token-file") == 0)
                        opt.token_file = v;
                else if (strcmp(a, "--cacert") == 0)
                        opt.cacert = v;
                else if (strcmp(a, "--get") == 0)
                        opt.get = v;
                else if (strcmp(a, "--protocol") == 0)
                        opt.protocol = v;
                else if (strcmp(a, "--run-id") == 0)
                        opt.run_id = v;
                else if (strcmp(a, "--key-salt") == 0)
                        opt.key_salt = v;
                else if (strcmp(a, "--concurrency") == 0)
                        opt.concurrency = (unsigned)strtoul(v, NULL, 10);
                else if (strcmp(a, "--uploads") == 0)
                        opt.uploads = (unsigned)strtoul(v, NULL, 10);
                else {
                        fprintf(stderr, "collector-bench: unknown option '%s'\n", a);
                        return 2;
                }
        }
        if (strcmp(opt.protocol, "native") != 0 && strcmp(opt.protocol, "pyroscope") != 0 &&
            strcmp(opt.protocol, "connect") != 0 && strcmp(opt.protocol, "otlp") != 0) {
                fprintf(stderr,
                        "collector-bench: --protocol is native, pyroscope, connect or otlp\n");
                return 2;
        }
        if (!opt.url || (!opt.n_profiles && !opt.get) || opt.concurrency == 0 ||
            opt.concurrency > 4096 || opt.uploads == 0) {
                usage(stderr);
                return 2;
        }
        for (unsigned i = 0; i < opt.n_profiles; i++)
                if (read_file(opt.profile[i], &opt.body[i], &opt.body_len[i]) < 0) {
                        fprintf(stderr, "collector-bench: cannot read '%s'\n", opt.profile[i]);
                        return 2;
                }
        if (opt.token_file) {
                size_t n;
                if (read_file(opt.token_file, &opt.token, &n) < 0) {
                        fprintf(stderr, "collector-bench: cannot read '%s'\n", opt.token_file);
                        return 2;
                }
                opt.token[strcspn(opt.token, "\r\n")] = 0;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        multi = curl_multi_init();
        curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)opt.concurrency);
        agents = calloc(opt.concurrency, sizeof(*agents));
        latencies = calloc(opt.uploads, sizeof(*latencies));
        if (!multi || !agents || !latencies)
                return 1;
        t0 = now_s();
        for (unsigned i = 0; i < opt.concurrency && n_started < opt.uploads; i++) {
                agents[i].index = (int)i;
                agents[i].easy = curl_easy_init();
                start(multi, &agents[i]);
        }
        while (n_done < opt.uploads) {
                int running, left;
                CURLMsg *m;

                curl_multi_perform(multi, &running);
                while ((m = curl_multi_info_read(multi, &left))) {
                        struct agent *a;
                        long code = 0;

                        if (m->msg != CURLMSG_DONE)
                                continue;
                        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&a);
                        curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
                        curl_multi_remove_handle(multi, m->easy_handle);
                        latencies[n_done++] = now_s() - a->started;
                        if (m->data.result == CURLE_OK && code >= 200 && code < 300)
                                n_ok++;
                        else
                                n_failed++;
                        if (m->data.result == CURLE_OK && code >= 100 && code < 600)
                                status_counts[code / 100]++;
                        else
                                status_counts[0]++;
                        if (n_started < opt.uploads)
                                start(multi, a);
                }
                if (n_done < opt.uploads)
                        curl_multi_poll(multi, NULL, 0, 100, NULL);
        }
        t1 = now_s();
        qsort(latencies, n_done, sizeof(*latencies), cmp_double);
        printf("mode=%s concurrency=%u requests=%u ok=%u failed=%u seconds=%.3f rate=%.1f "
               "p50_ms=%.2f p99_ms=%.2f max_ms=%.2f body_bytes=%zu status_2xx=%u status_4xx=%u "
               "status_5xx=%u no_answer=%u bytes_per_request=%" PRIu64 "\n",
               opt.get ? "get" : "ingest", opt.concurrency, n_done, n_ok, n_failed, t1 - t0,
               (double)n_done / (t1 - t0), latencies[n_done / 2] * 1e3,
               latencies[(size_t)((double)n_done * 0.99) < n_done ? (size_t)((double)n_done * 0.99)
                                                                  : n_done - 1] *
                   1e3,
               latencies[n_done - 1] * 1e3, opt.get ? (size_t)0 : opt.body_len[0], status_counts[2],
               status_counts[4], status_counts[5], status_counts[0],
               n_started ? bytes_sent / n_started : 0);
        for (unsigned i = 0; i < opt.concurrency; i++) {
                if (agents[i].easy)
                        curl_easy_cleanup(agents[i].easy);
                curl_slist_free_all(agents[i].headers);
                free(agents[i].push);
        }
        curl_multi_cleanup(multi);
        curl_global_cleanup();
        free(agents);
        free(latencies);
        for (unsigned i = 0; i < opt.n_profiles; i++)
                free(opt.body[i]);
        free(opt.token);
        return n_failed ? 1 : 0;
}
