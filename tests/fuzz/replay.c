/* SPDX-License-Identifier: MIT */
/*
 * Runs a libFuzzer target without libFuzzer, so every build (with the
 * sanitizers in the asan build) exercises it in ctest:
 *
 *   replay [--mutate SECONDS] FILE-OR-DIR...
 *
 * First each file is run as it is (the seed corpus, or a crash to
 * reproduce). Then, with --mutate, inputs made from those files by random
 * edits (bytes flipped, set to edge values, inserted, deleted, repeated,
 * two inputs spliced) are run for that many seconds. The edits come from
 * a fixed seed, so a run can be repeated; an input that crashes the
 * target (a sanitizer's report, then abort) is written to
 * $FP_FUZZ_CRASH_DIR (default: the current directory) as crash-PID, for
 * replay FILE to reproduce. Prints how many inputs it ran; exits non-zero
 * when it could read none.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_SEEDS        4096
#define REPLAY_MAX_INPUT (1u << 20)

static struct {
        uint8_t *data;
        size_t len;
} seeds[MAX_SEEDS];
static size_t n_seeds;

/* The input being run, for the crash handler. */
static const uint8_t *volatile current;
static volatile size_t current_len;
static char crash_path[4096];

static void on_crash(int sig)
{
        int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        if (fd >= 0 && current) {
                size_t off = 0;
                while (off < current_len) {
                        ssize_t w = write(fd, current + off, current_len - off);
                        if (w <= 0)
                                break;
                        off += (size_t)w;
                }
                static const char msg[] = "replay: the crashing input is in ";
                (void)!write(2, msg, sizeof(msg) - 1);
                (void)!write(2, crash_path, strlen(crash_path));
                (void)!write(2, "\n", 1);
        }
        if (fd >= 0)
                close(fd);
        signal(sig, SIG_DFL);
        raise(sig);
}

static void run(const uint8_t *data, size_t len)
{
        current = data;
        current_len = len;
        LLVMFuzzerTestOneInput(data, len);
        current = NULL;
}

static int run_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        uint8_t *buf;
        long n;

        if (!f)
                return -1;
        if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
                fclose(f);
                return -1;
        }
        buf = malloc((size_t)n + 1);
        if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                fclose(f);
                return -1;
        }
        fclose(f);
        run(buf, (size_t)n);
        if (n_seeds < MAX_SEEDS && (size_t)n <= REPLAY_MAX_INPUT) {
                seeds[n_seeds].data = buf;
                seeds[n_seeds++].len = (size_t)n;
        } else {
                free(buf);
        }
        return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* One random edit of buf (len bytes, room for cap): its new length. */
static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
        static const uint8_t edges[] = {0x00, 0x01, 0x7f, 0x80, 0xff, '"',
                                        '\\', '{',  '}',  ':',  '='};
        size_t at = len ? next() % len : 0, n;

        switch (next() % 7) {
        case 0: /* flip a bit */
                if (len)
                        buf[at] ^= (uint8_t)(1u << (next() % 8));
                break;
        case 1: /* an edge value */
                if (len)
                        buf[at] = edges[next() % sizeof(edges)];
                break;
        case 2: /* a random byte inserted */
                if (len < cap) {
                        memmove(buf + at + 1, buf + at, len - at);
                        buf[at] = (uint8_t)next();
                        len++;
                }
                break;
        case 3: /* a run deleted */
                n = len - at ? 1 + next() % (len - at < 16 ? len - at : 16) : 0;
                memmove(buf + at, buf + at + n, len - at - n);
                len -= n;
                break;
        case 4: /* a run repeated */
                n = len - at ? 1 + next() % (len - at < 64 ? len - at : 64) : 0;
                if (len + n <= cap) {
                        memmove(buf + at + n, buf + at, len - at);
                        len += n;
                }
                break;
        case 5: /* a 4-byte word set to a large or small value */
                if (len >= 4) {
                        uint32_t v =
                            next() % 2 ? 0xffffffffu >> (next() % 32) : (uint32_t)(next() % 8);
                        memcpy(buf + (at > len - 4 ? len - 4 : at), &v, 4);
                }
                break;
        default: { /* spliced with another seed's tail */
                size_t j = next() % n_seeds, from = seeds[j].len ? next() % seeds[j].len : 0;
                n = seeds[j].len - from;
                if (at + n > cap)
                        n = cap - at;
                memcpy(buf + at, seeds[j].data + from, n);
                len = at + n;
                break;
        }
        }
        return len;
}

static unsigned long mutate_for(double seconds)
{
        struct timespec t0, t;
        unsigned long ran = 0;
        uint8_t *buf = malloc(REPLAY_MAX_INPUT + 4096);

        if (!buf || !n_seeds) {
                free(buf);
                return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                if (ran % 64 == 0) {
                        clock_gettime(CLOCK_MONOTONIC, &t);
                        if ((double)(t.tv_sec - t0.tv_sec) +
                                (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >=
                            seconds)
                                break;
                }
                size_t k = next() % n_seeds, len = seeds[k].len, cap = seeds[k].len + 4096;
                if (cap > REPLAY_MAX_INPUT + 4096)
                        cap = REPLAY_MAX_INPUT + 4096;
                memcpy(buf, seeds[k].data, len);
                for (unsigned e = 1 + next() % 8; e; e--)
                        len = mutate(buf, len, cap);
                /* The target gets exactly len bytes, so ASan sees a read past them. */
                uint8_t *in = malloc(len ? len : 1);
                if (!in)
                        break;
                memcpy(in, buf, len);
                run(in, len);
                free(in);
                ran++;
        }
        free(buf);
        return ran;
}

int main(int argc, char **argv)
{
        unsigned ran = 0;
        double seconds = 0;
        int i = 1;
        const char *dir = getenv("FP_FUZZ_CRASH_DIR");

        if (argc > 2 && strcmp(argv[1], "--mutate") == 0) {
                seconds = atof(argv[2]);
                i = 3;
        }
        snprintf(crash_path, sizeof(crash_path), "%s/crash-%d", dir && *dir ? dir : ".",
                 (int)getpid());
        signal(SIGABRT, on_crash);
        signal(SIGSEGV, on_crash);
        signal(SIGBUS, on_crash);
        signal(SIGFPE, on_crash);
        for (; i < argc; i++) {
                struct stat st;
                DIR *d;
                struct dirent *e;

                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "replay: cannot read '%s'\n", argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        ran += run_file(argv[i]) == 0;
                        continue;
                }
                d = opendir(argv[i]);
                while (d && (e = readdir(d))) {
                        char path[4096];
                        if (e->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                        ran += run_file(path) == 0;
                }
                if (d)
                        closedir(d);
        }
        printf("replay: ran %u inputs\n", ran);
        if (ran && seconds > 0)
                printf("replay: ran %lu mutated inputs in %.1f s\n", mutate_for(seconds), seconds);
        for (size_t k = 0; k < n_seeds; k++)
                free(seeds[k].data);
        return ran ? 0 : 1;
}
