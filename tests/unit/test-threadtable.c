/* SPDX-License-Identifier: MIT */
/*
 * A target's thread table (agent/sampling/threads.c), on this process: at start
 * every thread of /proc/self/task is attached; a thread reported born is
 * attached at once (two more perf fds), one reported gone before it could
 * be attached counts as missed, an exit detaches it (its fds closed, its
 * name kept), and the rescan finds a thread no tracker reported (each
 * second, or once BPF's tracker says it lost records); the rescan's timer
 * fires at whole seconds, with the agent's others, and drains the rings,
 * which at low rates wake the agent no more.
 *
 * (Named test-threadtable: integration/test-threads is the agent's.)
 */
#include "fp-test.h"
#include "symbols.h"
#include "target.h"
#include "targetconf.h"
#include "tick.h"
#include "unwind.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stop;
static pid_t tids[2];

static void *worker(void *arg)
{
        int i = (int)(intptr_t)arg;
        pthread_mutex_lock(&lock);
        tids[i] = (pid_t)syscall(SYS_gettid);
        pthread_cond_broadcast(&cond);
        while (stop <= i)
                pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        return NULL;
}

static unsigned perf_fds(void)
{
        char link[256], path[300];
        unsigned n = 0;
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
                ssize_t k = readlink(path, link, sizeof(link) - 1);
                if (k > 0) {
                        link[k] = 0;
                        n += strcmp(link, "anon_inode:[perf_event]") == 0;
                }
        }
        if (d)
                closedir(d);
        return n;
}

/*
 * pthread_join returns when the kernel clears the thread's tid word, before
 * the task has left /proc/self/task: a scan at the next start would still
 * find it. Wait (at most 5 s) until this process has @n threads.
 */
static void wait_threads(unsigned n)
{
        for (int tries = 0; tries < 500; tries++) {
                unsigned k = 0;
                DIR *d = opendir("/proc/self/task");
                struct dirent *de;
                while (d && (de = readdir(d)))
                        k += de->d_name[0] != '.';
                if (d)
                        closedir(d);
                if (k <= n)
                        return;
                usleep(10000);
        }
}

static pid_t start_worker(int i, pthread_t *th)
{
        pthread_create(th, NULL, worker, (void *)(intptr_t)i);
        pthread_mutex_lock(&lock);
        while (!tids[i])
                pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        return tids[i];
}

static void end_worker(int i, pthread_t th)
{
        pthread_mutex_lock(&lock);
        stop = i + 1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
        pthread_join(th, NULL);
}

/* When a timer of test_tick() fired (CLOCK_MONOTONIC ns). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
        struct timespec ts;
        (void)fd;
        (void)what;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        *(uint64_t *)arg = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * The rescan's timer (tick.h): the next whole second (or multiple of the
 * period), one less than a tenth of it away skipped; two timers armed for
 * the same second at different moments fire together, in one wake-up.
 */
static void test_tick(void)
{
        struct timeval tv = fp_tick_until(7500000000ULL, 1);
        FP_CHECK_EQ_INT(tv.tv_sec, 0);
        FP_CHECK_EQ_INT(tv.tv_usec, 500000);
        tv = fp_tick_until(7950000000ULL, 1); /* 50 ms before 8 s: to 9 s */
        FP_CHECK_EQ_INT(tv.tv_sec, 1);
        FP_CHECK_EQ_INT(tv.tv_usec, 50000);
        tv = fp_tick_until(8000000000ULL, 1);
        FP_CHECK_EQ_INT(tv.tv_sec, 1);
        FP_CHECK_EQ_INT(tv.tv_usec, 0);
        tv = fp_tick_until(23200000000ULL, 10);
        FP_CHECK_EQ_INT(tv.tv_sec, 6);
        FP_CHECK_EQ_INT(tv.tv_usec, 800000);

        struct event_config *ecfg = event_config_new();
        event_config_set_flag(ecfg, EVENT_BASE_FLAG_PRECISE_TIMER); /* as the agent's */
        struct event_base *base = event_base_new_with_config(ecfg);
        event_config_free(ecfg);
        uint64_t at[2] = {0, 0};
        struct event *ev[2] = {evtimer_new(base, on_tick, &at[0]),
                               evtimer_new(base, on_tick, &at[1])};
        /* Both aim at the same second: not near the tenth before it that is skipped. */
        struct timespec now;
        do {
                usleep(10000);
                clock_gettime(CLOCK_REALTIME, &now);
        } while (now.tv_nsec < 200000000 || now.tv_nsec > 700000000);
        fp_tick_arm(ev[0], 1);
        usleep(20000);
        fp_tick_arm(ev[1], 1);
        event_base_dispatch(base); /* ends when both have fired */
        uint64_t apart = at[0] > at[1] ? at[0] - at[1] : at[1] - at[0];
        if (apart >= 1000000)
                fprintf(stderr, "tick: timers armed 20 ms apart fired %llu us apart\n",
                        (unsigned long long)(apart / 1000));
        FP_CHECK(at[0] && at[1] && apart < 1000000);
        event_free(ev[0]);
        event_free(ev[1]);
        event_base_free(base);
}

static volatile int spinning = 1;

static void *spinner(void *arg)
{
        (void)arg;
        while (spinning)
                ;
        return NULL;
}

/*
 * A thread's ring (perf.h, FP_PERF_THREAD_RING_MS): one that holds a
 * second of samples wakes the agent only each 7/8 of it written, one that
 * holds less (16 KiB copies at 99 Hz; 1 kHz) each half; and a busy thread
 * at 99 Hz is drained by the target's tick each second, its ring waking
 * the agent at most once in 1.8 s.
 */
static void test_ring_wake(void)
{
        long page = sysconf(_SC_PAGESIZE);
        struct fp_perf_config cfg = {0};

        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock", &cfg, NULL, 0), 0);
        cfg.freq = 99;
        cfg.unwind = FP_UNWIND_AUTO; /* 16 KiB copies, about 1.7 MB/s */
        fp_targetconf_finish(&cfg);
        FP_CHECK(cfg.no_user_chain); /* auto unwinds the copy: no kernel walk of user frames */
        FP_CHECK_EQ_INT((long)cfg.ring_pages * page, 1 << 20);
        FP_CHECK_EQ_INT(cfg.ring_wake_bytes, 0);
        fp_targetconf_set_stack(&cfg, 3456); /* fitted: about 400 KB/s */
        FP_CHECK_EQ_INT((long)cfg.ring_pages * page, 512 << 10);
        FP_CHECK_EQ_INT(cfg.ring_wake_bytes, 448 << 10);
        cfg.freq = 1000;
        fp_targetconf_set_stack(&cfg, 3456);
        FP_CHECK_EQ_INT((long)cfg.ring_pages * page, 1 << 20);
        FP_CHECK_EQ_INT(cfg.ring_wake_bytes, 0);

        struct event_base *base = event_base_new();
        struct fp_symcache *cache = fp_symcache_new();
        struct fp_target *t = NULL;
        struct fp_target_stats st;
        pthread_t th;
        char err[256];

        cfg = (struct fp_perf_config){0};
        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock", &cfg, NULL, 0), 0);
        cfg.freq = 99;
        cfg.unwind = FP_UNWIND_FP;
        fp_targetconf_finish(&cfg);
        FP_CHECK(!cfg.no_user_chain); /* fp reads the kernel's chain */
        pthread_create(&th, NULL, spinner, NULL);
        int r = fp_target_start(base, cache, getpid(), &cfg, &t, err, sizeof(err));
        if (r < 0)
                fprintf(stderr, "start: %s\n", err);
        FP_CHECK_EQ_INT(r, 0);
        if (r == 0) {
                /*
                 * 1.8 s: a tick at least, and short of the ring's 7/8 (about
                 * 2.1 s of these samples). What the ticks left undrained is
                 * at most the 1.1 s since the last one.
                 */
                struct timeval tv = {1, 800000};
                event_base_loopexit(base, &tv);
                event_base_dispatch(base);
                fp_target_stats(t, &st);
                uint64_t ticked = st.samples;
                fp_target_drain(t);
                fp_target_stats(t, &st);
                fprintf(stderr,
                        "ring: a busy thread at 99 Hz for 1.8 s: %llu samples, %llu left for "
                        "the last drain, %llu wake-ups\n",
                        (unsigned long long)st.samples, (unsigned long long)(st.samples - ticked),
                        (unsigned long long)st.ring_wakes);
                FP_CHECK(st.samples >= 50);
                FP_CHECK(st.samples - ticked <= 125);
                FP_CHECK(st.ring_wakes <= 1);
                fp_target_free(t);
        }
        spinning = 0;
        pthread_join(th, NULL);
        fp_symcache_free(cache);
        event_base_free(base);
}

/*
 * A thread born to a target whose stack copy is 32 KiB (fitted up to it)
 * gets its first sample: the starter's ring holds such samples (its 8
 * pages did not, and every thread born after the copy grew went
 * unsampled until it exited).
 */
static void test_starter_big_stack(void)
{
        struct event_base *base = event_base_new();
        struct fp_symcache *cache = fp_symcache_new();
        struct fp_perf_config cfg = {0};
        struct fp_target *t = NULL;
        struct fp_target_stats st;
        char err[256];
        pthread_t th;

        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock", &cfg, NULL, 0), 0);
        cfg.period = 1000000;
        cfg.unwind = FP_UNWIND_AUTO;
        fp_targetconf_finish(&cfg);
        fp_targetconf_set_stack(&cfg, 32768);
        int r = fp_target_start(base, cache, getpid(), &cfg, &t, err, sizeof(err));
        if (r < 0)
                fprintf(stderr, "start: %s\n", err);
        FP_CHECK_EQ_INT(r, 0);
        if (r == 0) {
                spinning = 1;
                pthread_create(&th, NULL, spinner, NULL);
                pid_t tid = 0;
                /* Its tid: the task that is not this one (the spinner spins from its start). */
                for (int tries = 0; tries < 100 && !tid; tries++) {
                        DIR *d = opendir("/proc/self/task");
                        struct dirent *de;
                        while (d && (de = readdir(d)))
                                if (de->d_name[0] != '.' && atoi(de->d_name) != getpid())
                                        tid = atoi(de->d_name);
                        if (d)
                                closedir(d);
                        if (!tid)
                                usleep(1000);
                }
                FP_CHECK(tid > 0);
                FP_CHECK_EQ_INT(fp_target_thread_born(t, tid, 0), 0);
                /*
                 * The loop until the spinner has run 120 ms of CPU since it was attached (5 s
                 * at most): its first period is 1 ms at most. Wall time is not CPU time on a
                 * busy machine (200 ms of the loop beside a CPU-bound job once gave the
                 * spinner under 50 ms).
                 */
                clockid_t cid;
                struct timespec ts0 = {0}, ts;
                FP_CHECK_EQ_INT(pthread_getcpuclockid(th, &cid), 0);
                FP_CHECK_EQ_INT(clock_gettime(cid, &ts0), 0);
                for (int round = 0; round < 50; round++) {
                        struct timeval tv = {0, 100000};
                        event_base_loopexit(base, &tv);
                        event_base_dispatch(base);
                        if (clock_gettime(cid, &ts) == 0 &&
                            (ts.tv_sec - ts0.tv_sec) * 1000 +
                                    (ts.tv_nsec - ts0.tv_nsec) / 1000000 >=
                                120)
                                break;
                }
                fp_target_drain(t);
                fp_target_stats(t, &st);
                fprintf(stderr, "starter with 32 KiB copies: %llu first samples, %llu samples\n",
                        (unsigned long long)st.first_samples, (unsigned long long)st.samples);
                FP_CHECK(st.first_samples >= 1);
                FP_CHECK(st.samples >= 50);
                spinning = 0;
                pthread_join(th, NULL);
                fp_target_free(t);
        }
        fp_symcache_free(cache);
        event_base_free(base);
}

int main(void)
{
        test_tick();
        test_ring_wake();
        test_starter_big_stack();
        wait_threads(1); /* their spinners and the symbol cache's loaders gone */

        struct event_base *base = event_base_new();
        struct fp_symcache *cache = fp_symcache_new();
        struct fp_perf_config cfg = {0};
        struct fp_target *t = NULL;
        struct fp_target_stats st;
        pthread_t th0, th1;
        char err[256];

        FP_CHECK_EQ_INT(fp_perf_event_list_parse("cpu-clock", &cfg, NULL, 0), 0);
        cfg.period = 10000000;
        cfg.unwind = 1; /* fp: a small stack copy is enough here */
        fp_targetconf_finish(&cfg);
        unsigned fds0 = perf_fds();
        int r = fp_target_start(base, cache, getpid(), &cfg, &t, err, sizeof(err));
        if (r < 0)
                fprintf(stderr, "start: %s\n", err);
        FP_CHECK_EQ_INT(r, 0);
        if (r < 0)
                return FP_TEST_DONE();
        fp_target_stats(t, &st);
        FP_CHECK_EQ_INT(st.threads_live, 1);
        unsigned fds1 = perf_fds();
        /*
         * A sampler and a side-band event, and the starter of its random
         * first period until its first sample (threads.c): this thread
         * sleeps, 10 ms is long.
         */
        FP_CHECK_EQ_INT(fds1, fds0 + 3);

        /* A birth reported by a tracker: attached at once. */
        pid_t tid0 = start_worker(0, &th0);
        FP_CHECK_EQ_INT(fp_target_thread_born(t, tid0, 0), 0);
        fp_target_stats(t, &st);
        FP_CHECK_EQ_INT(st.threads_live, 2);
        FP_CHECK_EQ_INT(st.threads_seen, 2);
        FP_CHECK_EQ_INT(perf_fds(), fds1 + 3);
        /* Reported twice: still one record. */
        FP_CHECK_EQ_INT(fp_target_thread_born(t, tid0, 0), 0);
        fp_target_stats(t, &st);
        FP_CHECK_EQ_INT(st.threads_seen, 2);

        /* Gone before it could be attached: counted as missed, nothing opened. */
        FP_CHECK_EQ_INT(fp_target_thread_born(t, 0x7ffffff0, 0), -ESRCH);
        fp_target_stats(t, &st);
        FP_CHECK_EQ_INT(st.threads_missed, 1);
        FP_CHECK_EQ_INT(st.threads_live, 2);

        /* An exit: its events are closed at once. */
        end_worker(0, th0);
        fp_target_thread_exited(t, tid0);
        fp_target_stats(t, &st);
        FP_CHECK_EQ_INT(st.threads_live, 1);
        FP_CHECK_EQ_INT(perf_fds(), fds1);

        /*
         * A thread nobody reported: with births said to come from a tracker
         * (FORK records then ignored), the rescan finds it once the tracker
         * says it lost records (its /proc pass is every 10 s otherwise).
         */
        fp_target_set_tracking(t, true, false, 0, NULL, NULL);
        pid_t tid1 = start_worker(1, &th1);
        fp_target_proc_pass_soon(t);
        /* The symbol cache's loader threads may be found too, once a sample needed them. */
        for (int i = 0; i < 300; i++) {
                struct timeval tv = {0, 10000};
                event_base_loopexit(base, &tv);
                event_base_dispatch(base);
                if (fp_target_thread_name(t, tid1)[0])
                        break;
        }
        fp_target_stats(t, &st);
        FP_CHECK(fp_target_thread_name(t, tid1)[0] != '\0');
        FP_CHECK(st.threads_live >= 2);
        FP_CHECK(st.threads_by_rescan >= 1);
        end_worker(1, th1);

        fp_target_free(t);
        FP_CHECK_EQ_INT(perf_fds(), fds0);
        fp_symcache_free(cache);
        event_base_free(base);
        return FP_TEST_DONE();
}
