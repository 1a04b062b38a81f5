// SPDX-License-Identifier: MIT
/*
 * truth — a workload whose CPU profile is known because it measures it.
 *
 * Named threads ("w-alpha", "w-beta", "w-gamma", and optionally "late-N"
 * started later) burn CPU at fixed duty cycles (60 %, 30 %, 15 % and 20 %
 * of one core by default, so the total stays well under the two cores of a
 * small test machine).  Each thread repeatedly calls one of two callers,
 * mid_one() and mid_two(), which call one of three leaves, leaf_hash(),
 * leaf_sqrt() and leaf_mem(), following a fixed per-thread weighted
 * round-robin table.  The stacks therefore look like
 *
 *     start_thread → worker_main|late_main → mid_one|mid_two → leaf_*
 *
 * The ground truth is measured, not assumed: every caller→leaf call is
 * bracketed by clock_gettime(CLOCK_THREAD_CPUTIME_ID) and the CPU time it
 * took is added to a per (thread, caller, leaf) counter.  A leaf call is
 * calibrated to last about --leaf-us microseconds (1500 by default), so the
 * two clock reads around it (about a microsecond) are noise, and everything
 * outside the leaves (pacing, sleeping) is a tiny fraction of the CPU time.
 *
 * At the end (after --seconds of work, or on SIGTERM/SIGINT) the truth is
 * written as JSON to --truth FILE (atomically: FILE.tmp, then rename):
 *
 *   {"pid": P, "scenario": "ratios", "seconds": S, "wall_ns": W, "leaf_us": L,
 *    "threads": {"w-alpha": {"tid": T, "duty": 0.6, "late": false,
 *                            "total_ns": N,          // sum over its stacks
 *                            "thread_cpu_ns": C,     // whole thread CPU
 *                            "calls": K,
 *                            "stacks": {"mid_one;leaf_hash": N, ...}}, ...},
 *    "leaves":  {"leaf_hash": N, ...},                // summed over threads
 *    "stacks":  {"mid_one;leaf_hash": N, ...},        // summed over threads
 *    "total_ns": N}
 *
 * Usage: truth [--seconds S] [--truth FILE] [--ready FILE]
 *              [--wait-for-start FILE] [--late-threads N] [--late-delay-ms D]
 *              [--late-seconds S] [--late-duty F] [--duty-scale F]
 *              [--leaf-us U] [--hold] [--scenario ratios|serial|equal|deep]
 *
 * --scenario picks other thread sets for the benchmarks (see scenarios[]):
 * "serial" (one thread, leaves 5:3:2 by calls), "equal" (four identical
 * threads "eq-N" at 35 % each), "deep" (one thread calling leaves both
 * through mid_one() and under 80 frames of deep_rec() recursion).
 *
 * The PID is printed on stdout as the first line.  --ready FILE is written
 * (atomically) once every initial thread exists, is named, and is either
 * waiting for --wait-for-start FILE to appear or already working; a profiler
 * attached after --ready and before --wait-for-start therefore sees the
 * whole measured window.  --seconds 0 works until a signal.  --hold keeps the
 * process alive (idle) after the truth is written, until SIGTERM/SIGINT.
 * Late threads name themselves, then idle 100 ms before working, so a
 * profiler that reads a new thread's name shortly after it appears sees the
 * final one.
 */

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

/* Global (not static) so their names are plain ELF symbols of the binary. */
uint64_t leaf_hash(long n, uint64_t seed);
uint64_t leaf_sqrt(long n, uint64_t seed);
uint64_t leaf_mem(long n, uint64_t seed);
void *worker_main(void *arg);
void *late_main(void *arg);

enum leaf { LEAF_HASH, LEAF_SQRT, LEAF_MEM, N_LEAVES };
enum caller { MID_ONE, MID_TWO, DEEP_REC, N_CALLERS };

uint64_t mid_one(enum leaf leaf, uint64_t seed);
uint64_t mid_two(enum leaf leaf, uint64_t seed);
uint64_t deep_rec(int depth, enum leaf leaf, uint64_t seed);

static const char *const leaf_names[N_LEAVES] = {"leaf_hash", "leaf_sqrt", "leaf_mem"};
static const char *const caller_names[N_CALLERS] = {"mid_one", "mid_two", "deep_rec"};

struct unit {
        enum caller caller;
        enum leaf leaf;
        int weight;
};

struct mix {
        const struct unit *units;
        size_t n_units;
};

/* The per-thread call tables: weights are calls, not time (calls differ a
 * little in length); the truth file has the measured time. */
static const struct unit alpha_units[] = {
    {MID_ONE, LEAF_HASH, 3},
    {MID_TWO, LEAF_HASH, 1},
    {MID_ONE, LEAF_SQRT, 2},
    {MID_TWO, LEAF_MEM, 2},
};
static const struct unit beta_units[] = {
    {MID_TWO, LEAF_MEM, 2},
    {MID_ONE, LEAF_SQRT, 1},
    {MID_TWO, LEAF_HASH, 1},
};
static const struct unit gamma_units[] = {
    {MID_ONE, LEAF_HASH, 1},
    {MID_TWO, LEAF_SQRT, 1},
};
static const struct unit late_units[] = {
    {MID_ONE, LEAF_SQRT, 1},
    {MID_TWO, LEAF_HASH, 1},
};
/* Scenario "serial": one thread, three leaves in 5:3:2 call ratio. */
static const struct unit serial_units[] = {
    {MID_ONE, LEAF_HASH, 5},
    {MID_ONE, LEAF_SQRT, 3},
    {MID_TWO, LEAF_MEM, 2},
};
/* Scenario "equal": identical threads. */
static const struct unit equal_units[] = {
    {MID_ONE, LEAF_HASH, 1},
    {MID_TWO, LEAF_SQRT, 1},
};
/* Scenario "deep": the same thread alternates a shallow call and calls
 * made under DEEP_FRAMES frames of recursion. */
static const struct unit deep_units[] = {
    {MID_ONE, LEAF_HASH, 2},
    {DEEP_REC, LEAF_SQRT, 1},
    {DEEP_REC, LEAF_HASH, 1},
};

#define MIX(a)                                                                                     \
        {                                                                                          \
                (a), sizeof(a) / sizeof((a)[0])                                                    \
        }

/* Below the kernel's default perf_event_max_stack (127) with the frames
 * above worker_main and below the leaf. */
#define DEEP_FRAMES 80

#define MAX_INITIAL 4

struct scenario {
        const char *name;
        int n_threads;
        struct {
                const char *name;
                double duty;
                const struct unit *units;
                size_t n_units;
        } threads[MAX_INITIAL];
};

#define SCEN_THREAD(n, d, a)                                                                       \
        {                                                                                          \
                (n), (d), (a), sizeof(a) / sizeof((a)[0])                                          \
        }

/*
 * The thread sets --scenario chooses.  "ratios" (the default) gives threads
 * known, unequal shares and leaves reached through two callers; "serial"
 * one thread whose leaves have known shares; "equal" four identical threads
 * (1.4 cores in all); "deep" one thread whose leaves are called both
 * directly and under DEEP_FRAMES frames of recursion.
 */
static const struct scenario scenarios[] = {
    {"ratios",
     3,
     {SCEN_THREAD("w-alpha", 0.60, alpha_units), SCEN_THREAD("w-beta", 0.30, beta_units),
      SCEN_THREAD("w-gamma", 0.15, gamma_units)}},
    {"serial", 1, {SCEN_THREAD("s-main", 0.80, serial_units)}},
    {"equal",
     4,
     {SCEN_THREAD("eq-0", 0.35, equal_units), SCEN_THREAD("eq-1", 0.35, equal_units),
      SCEN_THREAD("eq-2", 0.35, equal_units), SCEN_THREAD("eq-3", 0.35, equal_units)}},
    {"deep", 1, {SCEN_THREAD("d-main", 0.80, deep_units)}},
};

struct worker {
        char name[16];
        double duty;
        struct mix mix;
        int late;
        pthread_t thread;
        int started;
        pid_t tid;
        uint64_t ns[N_CALLERS][N_LEAVES];
        uint64_t calls;
        uint64_t thread_cpu_ns;
        uint64_t sink;
};

#define MAX_LATE  64
#define MEM_SLOTS (1u << 20) /* 4 MiB of uint32_t: bigger than most L2s */

static volatile sig_atomic_t got_signal;
static atomic_int stop_work;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cond = PTHREAD_COND_INITIALIZER;
static int start_go;
static struct timespec work_start;
static long leaf_iters[N_LEAVES];
static uint32_t *mem_ring;
static double late_seconds_opt = -1;
static const char *scenario_name = "ratios";

static uint64_t ts_ns(const struct timespec *ts)
{
        return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static uint64_t clock_ns(clockid_t clk)
{
        struct timespec ts;
        clock_gettime(clk, &ts);
        return ts_ns(&ts);
}

static void sleep_ns(uint64_t ns)
{
        struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                              .tv_nsec = (long)(ns % 1000000000u)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !atomic_load(&stop_work))
                ;
}

/* ---- leaves: pure computation, no calls, so the sampled leaf is them ---- */

/*
 * GCC gives a function that calls nothing no frame of its own even under
 * -fno-omit-frame-pointer (seen with GCC 12 at -O1); a frame-pointer unwinder
 * then skips the leaf's caller.  Taking the frame address forces the
 * push rbp / mov rsp,rbp prologue, so caller→leaf attribution is well
 * defined for every profiler that walks frame pointers.
 */
static void *volatile frame_sink;
#define FORCE_FRAME() (frame_sink = __builtin_frame_address(0))

NOINLINE uint64_t leaf_hash(long n, uint64_t seed)
{
        FORCE_FRAME();
        uint64_t x = seed | 1;
        for (long i = 0; i < n; i++) {
                x ^= x >> 33;
                x *= 0xff51afd7ed558ccdULL;
                x ^= x >> 29;
                x += (uint64_t)i;
        }
        return x;
}

NOINLINE uint64_t leaf_sqrt(long n, uint64_t seed)
{
        FORCE_FRAME();
        double acc = 0;
        for (long i = 0; i < n; i++) {
                double v = (double)(i + (long)(seed & 7)) + 1.5;
                double r = v;
                for (int k = 0; k < 4; k++)
                        r = 0.5 * (r + v / r); /* Newton: sqrt without libm */
                acc += r;
        }
        return (uint64_t)acc;
}

NOINLINE uint64_t leaf_mem(long n, uint64_t seed)
{
        FORCE_FRAME();
        uint32_t at = (uint32_t)(seed % MEM_SLOTS);
        for (long i = 0; i < n; i++)
                at = mem_ring[at]; /* dependent loads over a random cycle */
        return at;
}

static uint64_t run_leaf(enum leaf leaf, long n, uint64_t seed)
{
        switch (leaf) {
        case LEAF_HASH:
                return leaf_hash(n, seed);
        case LEAF_SQRT:
                return leaf_sqrt(n, seed);
        default:
                return leaf_mem(n, seed);
        }
}

/* ---- callers: the two distinct parents of the leaves ---- */

NOINLINE uint64_t mid_one(enum leaf leaf, uint64_t seed)
{
        switch (leaf) {
        case LEAF_HASH:
                return leaf_hash(leaf_iters[LEAF_HASH], seed);
        case LEAF_SQRT:
                return leaf_sqrt(leaf_iters[LEAF_SQRT], seed);
        default:
                return leaf_mem(leaf_iters[LEAF_MEM], seed);
        }
}

NOINLINE uint64_t mid_two(enum leaf leaf, uint64_t seed)
{
        switch (leaf) {
        case LEAF_HASH:
                return leaf_hash(leaf_iters[LEAF_HASH], seed ^ 0x5555);
        case LEAF_SQRT:
                return leaf_sqrt(leaf_iters[LEAF_SQRT], seed ^ 0x5555);
        default:
                return leaf_mem(leaf_iters[LEAF_MEM], seed ^ 0x5555);
        }
}

/* Recurses depth more frames, then calls the leaf: the deepest frame below
 * the leaf is deep_rec itself.  Like mid_one() and mid_two() it calls the
 * leaf itself, not through run_leaf(), whose frame would sit between. */
NOINLINE uint64_t deep_rec(int depth, enum leaf leaf, uint64_t seed)
{
        FORCE_FRAME();
        if (depth > 1)
                return deep_rec(depth - 1, leaf, seed + 1) + 1;
        switch (leaf) {
        case LEAF_HASH:
                return leaf_hash(leaf_iters[LEAF_HASH], seed);
        case LEAF_SQRT:
                return leaf_sqrt(leaf_iters[LEAF_SQRT], seed);
        default:
                return leaf_mem(leaf_iters[LEAF_MEM], seed);
        }
}

/* One measured caller→leaf call; returns the CPU ns it took. */
static uint64_t measured_call(struct worker *w, const struct unit *u)
{
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        uint64_t r = u->caller == MID_ONE   ? mid_one(u->leaf, w->calls)
                     : u->caller == MID_TWO ? mid_two(u->leaf, w->calls)
                                            : deep_rec(DEEP_FRAMES, u->leaf, w->calls);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        uint64_t d = ts_ns(&b) - ts_ns(&a);
        w->sink += r;
        w->ns[u->caller][u->leaf] += d;
        w->calls++;
        return d;
}

/*
 * The work loop shared by initial and late threads: keep the measured CPU
 * time at duty × elapsed wall time, calling the mix's units in weighted
 * round-robin order, and sleep while ahead.
 */
static void work_loop(struct worker *w, double seconds)
{
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
        uint64_t limit = seconds > 0 ? (uint64_t)(seconds * 1e9) : UINT64_MAX;
        uint64_t busy = 0;
        size_t ui = 0;
        int left = w->mix.units[0].weight;

        while (!atomic_load(&stop_work)) {
                uint64_t elapsed = clock_ns(CLOCK_MONOTONIC) - t0;
                if (elapsed >= limit)
                        break;
                double want = w->duty * (double)elapsed;
                if ((double)busy >= want) {
                        double ahead = ((double)busy - want) / w->duty;
                        uint64_t nap = ahead > 20e6 ? 20000000u : (uint64_t)ahead + 100000u;
                        sleep_ns(nap);
                        continue;
                }
                busy += measured_call(w, &w->mix.units[ui]);
                if (--left <= 0) {
                        ui = (ui + 1) % w->mix.n_units;
                        left = w->mix.units[ui].weight;
                }
        }
        w->thread_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

NOINLINE void *worker_main(void *arg)
{
        struct worker *w = arg;
        pthread_setname_np(pthread_self(), w->name);
        w->tid = (pid_t)syscall(SYS_gettid);
        pthread_mutex_lock(&start_lock);
        w->started = 1;
        pthread_cond_broadcast(&start_cond);
        while (!start_go)
                pthread_cond_wait(&start_cond, &start_lock);
        pthread_mutex_unlock(&start_lock);
        work_loop(w, 0);
        return NULL;
}

NOINLINE void *late_main(void *arg)
{
        struct worker *w = arg;
        pthread_setname_np(pthread_self(), w->name);
        w->tid = (pid_t)syscall(SYS_gettid);
        sleep_ns(100000000u); /* let a profiler read the final name first */
        work_loop(w, late_seconds_opt);
        return NULL;
}

/* ---- set-up ---- */

static void build_mem_ring(void)
{
        mem_ring = malloc(MEM_SLOTS * sizeof(*mem_ring));
        uint32_t *perm = malloc(MEM_SLOTS * sizeof(*perm));
        if (!mem_ring || !perm) {
                fprintf(stderr, "truth: out of memory\n");
                exit(1);
        }
        for (uint32_t i = 0; i < MEM_SLOTS; i++)
                perm[i] = i;
        uint64_t s = 0x9e3779b97f4a7c15ULL;
        for (uint32_t i = MEM_SLOTS - 1; i > 0; i--) {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                uint32_t j = (uint32_t)(s % (i + 1));
                uint32_t t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
        }
        for (uint32_t i = 0; i < MEM_SLOTS; i++)
                mem_ring[perm[i]] = perm[(i + 1) % MEM_SLOTS];
        free(perm);
}

/* Find the iteration count that makes each leaf last about leaf_us of CPU. */
static void calibrate(double leaf_us)
{
        for (int l = 0; l < N_LEAVES; l++) {
                long n = 1000;
                uint64_t sink = 0;
                for (int round = 0; round < 8; round++) {
                        uint64_t a = clock_ns(CLOCK_THREAD_CPUTIME_ID);
                        sink += run_leaf((enum leaf)l, n, (uint64_t)round);
                        uint64_t d = clock_ns(CLOCK_THREAD_CPUTIME_ID) - a;
                        if (d < 1000)
                                d = 1000;
                        double scale = leaf_us * 1000.0 / (double)d;
                        if (scale > 0.9 && scale < 1.1 && round > 1)
                                break;
                        if (scale > 100)
                                scale = 100;
                        n = (long)((double)n * scale);
                        if (n < 1)
                                n = 1;
                }
                leaf_iters[l] = n;
                if (sink == 42) /* keep the results alive */
                        fputc(' ', stderr);
        }
}

static int write_file_atomic(const char *path, const char *text)
{
        size_t len = strlen(path) + 5;
        char *tmp = malloc(len);
        if (!tmp)
                return -ENOMEM;
        snprintf(tmp, len, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f) {
                int r = -errno;
                free(tmp);
                return r;
        }
        fputs(text, f);
        int bad = ferror(f);
        if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
                int r = -errno;
                unlink(tmp);
                free(tmp);
                return r ? r : -EIO;
        }
        free(tmp);
        return 0;
}

/* A growable string for the JSON. */
struct buf {
        char *p;
        size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void bprintf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        for (;;) {
                va_start(ap, fmt);
                int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
                va_end(ap);
                if (n < 0)
                        abort();
                if (b->p && b->len + (size_t)n < b->cap) {
                        b->len += (size_t)n;
                        return;
                }
                size_t cap = (b->cap + (size_t)n + 1) * 2;
                char *p = realloc(b->p, cap);
                if (!p) {
                        fprintf(stderr, "truth: out of memory\n");
                        exit(1);
                }
                b->p = p;
                b->cap = cap;
        }
}

static void json_stacks(struct buf *b, uint64_t ns[N_CALLERS][N_LEAVES])
{
        int first = 1;
        bprintf(b, "{");
        for (int c = 0; c < N_CALLERS; c++)
                for (int l = 0; l < N_LEAVES; l++) {
                        if (!ns[c][l])
                                continue;
                        bprintf(b, "%s\"%s;%s\": %llu", first ? "" : ", ", caller_names[c],
                                leaf_names[l], (unsigned long long)ns[c][l]);
                        first = 0;
                }
        bprintf(b, "}");
}

static int write_truth(const char *path, struct worker *ws, int n_ws, double seconds,
                       uint64_t wall_ns, double leaf_us)
{
        struct buf b = {0};
        uint64_t all[N_CALLERS][N_LEAVES] = {{0}};
        uint64_t total = 0;

        bprintf(&b,
                "{\n  \"pid\": %d,\n  \"scenario\": \"%s\",\n  \"seconds\": %g,\n  \"wall_ns\": "
                "%llu,\n  \"leaf_us\": %g,\n",
                (int)getpid(), scenario_name, seconds, (unsigned long long)wall_ns, leaf_us);
        bprintf(&b, "  \"threads\": {\n");
        int first = 1;
        for (int i = 0; i < n_ws; i++) {
                struct worker *w = &ws[i];
                if (!w->started)
                        continue;
                uint64_t t = 0;
                for (int c = 0; c < N_CALLERS; c++)
                        for (int l = 0; l < N_LEAVES; l++) {
                                t += w->ns[c][l];
                                all[c][l] += w->ns[c][l];
                        }
                total += t;
                bprintf(
                    &b,
                    "%s    \"%s\": {\"tid\": %d, \"duty\": %g, \"late\": %s, \"total_ns\": %llu, "
                    "\"thread_cpu_ns\": %llu, \"calls\": %llu, \"stacks\": ",
                    first ? "" : ",\n", w->name, (int)w->tid, w->duty, w->late ? "true" : "false",
                    (unsigned long long)t, (unsigned long long)w->thread_cpu_ns,
                    (unsigned long long)w->calls);
                json_stacks(&b, w->ns);
                bprintf(&b, "}");
                first = 0;
        }
        bprintf(&b, "\n  },\n  \"leaves\": {");
        for (int l = 0; l < N_LEAVES; l++) {
                uint64_t s = 0;
                for (int c = 0; c < N_CALLERS; c++)
                        s += all[c][l];
                bprintf(&b, "%s\"%s\": %llu", l ? ", " : "", leaf_names[l], (unsigned long long)s);
        }
        bprintf(&b, "},\n  \"stacks\": ");
        json_stacks(&b, all);
        bprintf(&b, ",\n  \"total_ns\": %llu\n}\n", (unsigned long long)total);
        int r = write_file_atomic(path, b.p);
        free(b.p);
        return r;
}

static void on_signal(int sig)
{
        (void)sig;
        got_signal = 1;
}

static void usage(FILE *f)
{
        fprintf(f,
                "usage: truth [--seconds S] [--truth FILE] [--ready FILE] [--wait-for-start FILE]\n"
                "             [--late-threads N] [--late-delay-ms D] [--late-seconds S]\n"
                "             [--late-duty F] [--duty-scale F] [--leaf-us U] [--hold]\n"
                "             [--scenario ratios|serial|equal|deep]\n");
}

static double parse_num(const char *opt, const char *s, double lo, double hi)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || *end || v < lo || v > hi) {
                fprintf(stderr, "truth: bad value for --%s: '%s' (want %g..%g)\n", opt, s, lo, hi);
                exit(2);
        }
        return v;
}

int main(int argc, char **argv)
{
        double seconds = 10, late_delay_ms = 1500, late_duty = 0.2, duty_scale = 1, leaf_us = 1500;
        int n_late = 0, hold = 0;
        const char *truth_path = NULL, *ready_path = NULL, *wait_path = NULL;
        const struct scenario *scen = &scenarios[0];
        static const struct option opts[] = {
            {"seconds", required_argument, NULL, 's'},
            {"truth", required_argument, NULL, 't'},
            {"ready", required_argument, NULL, 'r'},
            {"wait-for-start", required_argument, NULL, 'w'},
            {"late-threads", required_argument, NULL, 'n'},
            {"late-delay-ms", required_argument, NULL, 'd'},
            {"late-seconds", required_argument, NULL, 'L'},
            {"late-duty", required_argument, NULL, 'D'},
            {"duty-scale", required_argument, NULL, 'S'},
            {"leaf-us", required_argument, NULL, 'u'},
            {"hold", no_argument, NULL, 'H'},
            {"scenario", required_argument, NULL, 'c'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        seconds = parse_num("seconds", optarg, 0, 1e6);
                        break;
                case 't':
                        truth_path = optarg;
                        break;
                case 'r':
                        ready_path = optarg;
                        break;
                case 'w':
                        wait_path = optarg;
                        break;
                case 'n':
                        n_late = (int)parse_num("late-threads", optarg, 0, MAX_LATE);
                        break;
                case 'd':
                        late_delay_ms = parse_num("late-delay-ms", optarg, 0, 1e9);
                        break;
                case 'L':
                        late_seconds_opt = parse_num("late-seconds", optarg, 0, 1e6);
                        break;
                case 'D':
                        late_duty = parse_num("late-duty", optarg, 0.01, 1);
                        break;
                case 'S':
                        duty_scale = parse_num("duty-scale", optarg, 0.01, 1.5);
                        break;
                case 'u':
                        leaf_us = parse_num("leaf-us", optarg, 50, 100000);
                        break;
                case 'H':
                        hold = 1;
                        break;
                case 'c':
                        scen = NULL;
                        for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
                                if (strcmp(optarg, scenarios[i].name) == 0)
                                        scen = &scenarios[i];
                        if (!scen) {
                                fprintf(
                                    stderr,
                                    "truth: unknown scenario '%s' (ratios, serial, equal, deep)\n",
                                    optarg);
                                return 2;
                        }
                        scenario_name = scen->name;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                usage(stderr);
                return 2;
        }

        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        printf("%d\n", (int)getpid());
        fflush(stdout);

        build_mem_ring();
        calibrate(leaf_us);

        struct worker ws[MAX_INITIAL + MAX_LATE];
        memset(ws, 0, sizeof(ws));
        const int n_initial = scen->n_threads;
        for (int i = 0; i < n_initial; i++) {
                snprintf(ws[i].name, sizeof(ws[i].name), "%s", scen->threads[i].name);
                ws[i].duty = scen->threads[i].duty * duty_scale;
                ws[i].mix = (struct mix){scen->threads[i].units, scen->threads[i].n_units};
                if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0) {
                        fprintf(stderr, "truth: Failed to create thread '%s'\n", ws[i].name);
                        return 1;
                }
        }
        pthread_mutex_lock(&start_lock);
        for (;;) {
                int all = 1;
                for (int i = 0; i < n_initial; i++)
                        all &= ws[i].started;
                if (all)
                        break;
                pthread_cond_wait(&start_cond, &start_lock);
        }
        pthread_mutex_unlock(&start_lock);

        if (ready_path) {
                char text[32];
                snprintf(text, sizeof(text), "%d\n", (int)getpid());
                int r = write_file_atomic(ready_path, text);
                if (r < 0) {
                        fprintf(stderr, "truth: Failed to write '%s': %s\n", ready_path,
                                strerror(-r));
                        return 1;
                }
        }
        if (wait_path) {
                struct stat st;
                while (stat(wait_path, &st) < 0 && !got_signal)
                        sleep_ns(2000000u);
        }

        clock_gettime(CLOCK_MONOTONIC, &work_start);
        pthread_mutex_lock(&start_lock);
        start_go = 1;
        pthread_cond_broadcast(&start_cond);
        pthread_mutex_unlock(&start_lock);
        fprintf(stderr, "truth: pid %d working for %gs (leaf iters hash %ld sqrt %ld mem %ld)\n",
                (int)getpid(), seconds, leaf_iters[LEAF_HASH], leaf_iters[LEAF_SQRT],
                leaf_iters[LEAF_MEM]);

        int n_ws = n_initial, late_made = 0;
        uint64_t t0 = ts_ns(&work_start);
        for (;;) {
                uint64_t el = clock_ns(CLOCK_MONOTONIC) - t0;
                if (got_signal || (seconds > 0 && el >= (uint64_t)(seconds * 1e9)))
                        break;
                if (!late_made && n_late > 0 && el >= (uint64_t)(late_delay_ms * 1e6)) {
                        for (int i = 0; i < n_late; i++) {
                                struct worker *w = &ws[n_ws];
                                snprintf(w->name, sizeof(w->name), "late-%d", i % 1000);
                                w->duty = late_duty * duty_scale;
                                w->mix = (struct mix)MIX(late_units);
                                w->late = 1;
                                if (pthread_create(&w->thread, NULL, late_main, w) != 0) {
                                        fprintf(stderr, "truth: Failed to create thread '%s'\n",
                                                w->name);
                                        break;
                                }
                                w->started = 1;
                                n_ws++;
                        }
                        late_made = 1;
                }
                sleep_ns(5000000u);
        }
        atomic_store(&stop_work, 1);
        for (int i = 0; i < n_ws; i++)
                pthread_join(ws[i].thread, NULL);
        uint64_t wall = clock_ns(CLOCK_MONOTONIC) - t0;

        if (truth_path) {
                int r = write_truth(truth_path, ws, n_ws, seconds, wall, leaf_us);
                if (r < 0) {
                        fprintf(stderr, "truth: Failed to write '%s': %s\n", truth_path,
                                strerror(-r));
                        return 1;
                }
        }
        fprintf(stderr, "truth: done after %.2fs\n", (double)wall / 1e9);
        while (hold && !got_signal)
                sleep_ns(20000000u);
        return 0;
}
