/* SPDX-License-Identifier: MIT */
/*
 * The store under failure (storage/store.h):
 *
 *   - I/O errors injected at every step: a VFS shim over SQLite's default
 *     VFS fails the Nth write, sync or truncate (once, as SQLITE_IOERR or
 *     SQLITE_FULL, or from then on), for N over the whole of a sequence of
 *     open, writes with eviction, upload marking and collection. After
 *     each run the store must still take a write, reopen without being
 *     "damaged", pass PRAGMA integrity_check, and account for every sample
 *     of every write that reported success (stored or counted as evicted)
 *     and for none of those that reported failure.
 *   - a full and a read-only file system: tmpfs mounts in a private mount
 *     namespace (root only; skipped with a note otherwise).
 *   - kill -9 of a writer at random moments: the file must reopen clean,
 *     pass integrity_check, and hold whole buckets only.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fp-test.h"
#include "pprof.h"
#include "store.h"

#define SEC 1000000000LL
#define T0  (1700000000LL * SEC)

static char dir[64];

/* ---- the fault-injecting VFS ---- */

enum fault_mode { FAULT_OFF, FAULT_ONCE, FAULT_FROM };

static sqlite3_vfs *real_vfs;
static sqlite3_vfs shim_vfs;
static sqlite3_io_methods shim_io;
static enum fault_mode fault_mode;
static long fault_at;  /* the op number that fails (FAULT_ONCE) or the first that does */
static long fault_ops; /* write, sync and truncate calls seen since arming */
static long fault_hits;
static int fault_rc; /* SQLITE_IOERR_* or SQLITE_FULL */

struct shim_file {
        sqlite3_file base;
        sqlite3_file *real;
};

static void fault_arm(enum fault_mode mode, long at, int rc)
{
        fault_mode = mode;
        fault_at = at;
        fault_ops = 0;
        fault_hits = 0;
        fault_rc = rc;
}

/* Counts one write-side call; true when it is to fail. */
static bool fault_now(void)
{
        long op;

        if (fault_mode == FAULT_OFF)
                return false;
        op = fault_ops++;
        if ((fault_mode == FAULT_ONCE && op == fault_at) ||
            (fault_mode == FAULT_FROM && op >= fault_at)) {
                fault_hits++;
                errno = fault_rc == SQLITE_FULL ? ENOSPC : EIO;
                return true;
        }
        return false;
}

static sqlite3_file *real_of(sqlite3_file *f)
{
        return ((struct shim_file *)f)->real;
}

static int shim_close(sqlite3_file *f)
{
        return real_of(f)->pMethods->xClose(real_of(f));
}

static int shim_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
        return real_of(f)->pMethods->xRead(real_of(f), buf, n, off);
}

static int shim_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
        if (fault_now())
                return fault_rc == SQLITE_FULL ? SQLITE_FULL : SQLITE_IOERR_WRITE;
        return real_of(f)->pMethods->xWrite(real_of(f), buf, n, off);
}

static int shim_truncate(sqlite3_file *f, sqlite3_int64 size)
{
        if (fault_now())
                return SQLITE_IOERR_TRUNCATE;
        return real_of(f)->pMethods->xTruncate(real_of(f), size);
}

static int shim_sync(sqlite3_file *f, int flags)
{
        if (fault_now())
                return SQLITE_IOERR_FSYNC;
        return real_of(f)->pMethods->xSync(real_of(f), flags);
}

static int shim_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
        return real_of(f)->pMethods->xFileSize(real_of(f), size);
}

static int shim_lock(sqlite3_file *f, int lock)
{
        return real_of(f)->pMethods->xLock(real_of(f), lock);
}

static int shim_unlock(sqlite3_file *f, int lock)
{
        return real_of(f)->pMethods->xUnlock(real_of(f), lock);
}

static int shim_check_reserved(sqlite3_file *f, int *out)
{
        return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}

static int shim_file_control(sqlite3_file *f, int op, void *arg)
{
        return real_of(f)->pMethods->xFileControl(real_of(f), op, arg);
}

static int shim_sector_size(sqlite3_file *f)
{
        return real_of(f)->pMethods->xSectorSize(real_of(f));
}

static int shim_device_characteristics(sqlite3_file *f)
{
        return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f));
}

static int shim_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
        return real_of(f)->pMethods->xShmMap(real_of(f), pg, pgsz, extend, pp);
}

static int shim_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
        return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
}

static void shim_shm_barrier(sqlite3_file *f)
{
        real_of(f)->pMethods->xShmBarrier(real_of(f));
}

static int shim_shm_unmap(sqlite3_file *f, int del)
{
        return real_of(f)->pMethods->xShmUnmap(real_of(f), del);
}

static int shim_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **pp)
{
        return real_of(f)->pMethods->xFetch(real_of(f), off, n, pp);
}

static int shim_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
        return real_of(f)->pMethods->xUnfetch(real_of(f), off, p);
}

static int shim_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
        struct shim_file *sf = (struct shim_file *)f;
        int rc;

        (void)vfs;
        sf->real = (sqlite3_file *)(sf + 1);
        rc = real_vfs->xOpen(real_vfs, name, sf->real, flags, out);
        if (rc != SQLITE_OK) {
                f->pMethods = NULL;
                return rc;
        }
        if (!shim_io.iVersion) {
                shim_io = (sqlite3_io_methods){
                    .iVersion = sf->real->pMethods->iVersion < 3 ? sf->real->pMethods->iVersion : 3,
                    .xClose = shim_close,
                    .xRead = shim_read,
                    .xWrite = shim_write,
                    .xTruncate = shim_truncate,
                    .xSync = shim_sync,
                    .xFileSize = shim_file_size,
                    .xLock = shim_lock,
                    .xUnlock = shim_unlock,
                    .xCheckReservedLock = shim_check_reserved,
                    .xFileControl = shim_file_control,
                    .xSectorSize = shim_sector_size,
                    .xDeviceCharacteristics = shim_device_characteristics,
                    .xShmMap = shim_shm_map,
                    .xShmLock = shim_shm_lock,
                    .xShmBarrier = shim_shm_barrier,
                    .xShmUnmap = shim_shm_unmap,
                    .xFetch = shim_fetch,
                    .xUnfetch = shim_unfetch,
                };
        }
        f->pMethods = &shim_io;
        return SQLITE_OK;
}

static int shim_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
        (void)vfs;
        return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int shim_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
        (void)vfs;
        return real_vfs->xAccess(real_vfs, name, flags, out);
}

static int shim_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
        (void)vfs;
        return real_vfs->xFullPathname(real_vfs, name, n, out);
}

static int shim_get_last_error(sqlite3_vfs *vfs, int n, char *buf)
{
        (void)vfs;
        return real_vfs->xGetLastError(real_vfs, n, buf);
}

static void shim_install(void)
{
        real_vfs = sqlite3_vfs_find(NULL);
        shim_vfs = *real_vfs;
        shim_vfs.zName = "fp-fault";
        shim_vfs.szOsFile = (int)sizeof(struct shim_file) + real_vfs->szOsFile;
        shim_vfs.pNext = NULL;
        shim_vfs.xOpen = shim_open;
        shim_vfs.xDelete = shim_delete;
        shim_vfs.xAccess = shim_access;
        shim_vfs.xFullPathname = shim_full_pathname;
        shim_vfs.xGetLastError = shim_get_last_error;
        /* Left to the real VFS: dlopen, randomness, sleep, time, system calls. */
        sqlite3_vfs_register(&shim_vfs, 1);
}

/* ---- batches and checks ---- */

static const struct fp_store_event cpu_clock = {
    .name = "cpu-clock",
    .count_type = "samples",
    .count_unit = "count",
    .value_type = "cpu",
    .value_unit = "nanoseconds",
};

/* A batch of n new stacks (from stack number first), each sample with count `count`. */
static struct fp_store_batch *make_batch(int64_t start, unsigned first, unsigned n, uint64_t count)
{
        struct fp_store_batch *b = fp_store_batch_new(start, 10 * SEC);
        struct fp_store_target t = {.host = "h", .pid = 42, .starttime = 7, .comm = "app"};
        uint32_t ti, ei;

        if (!b || fp_store_batch_add_target(b, &t, &ti) < 0 ||
            fp_store_batch_add_event(b, &cpu_clock, &ei) < 0)
                abort();
        for (unsigned i = 0; i < n; i++) {
                struct fp_store_frame f[8];
                char names[8][32];
                unsigned k = first + i;
                uint32_t si;

                for (unsigned j = 0; j < 8; j++) {
                        snprintf(names[j], sizeof(names[j]), j ? "fn_%u" : "leaf_%u",
                                 j ? (k + j) % 97 : k);
                        f[j] = (struct fp_store_frame){
                            .function = names[j],
                            .mapping_file = "/usr/bin/app",
                            .build_id = "0123abcd",
                            .mapping_start = 0x400000,
                            .mapping_limit = 0x900000,
                            .address = 0x400000 + 16 * (uint64_t)((k * 7 + j) % 65536),
                        };
                }
                if (fp_store_batch_add_stack(b, f, 8, &si) < 0 ||
                    fp_store_batch_add_sample(b, ti, ei, 42 + (pid_t)(i % 4), "w", si, count,
                                              count * 10) < 0)
                        abort();
        }
        return b;
}

static int write_batch(struct fp_store *s, int64_t start, unsigned first, unsigned n,
                       uint64_t count)
{
        struct fp_store_batch *b = make_batch(start, first, n, count);
        int r = fp_store_write_batch(s, b);
        fp_store_batch_free(b);
        return r;
}

static int add_drop(void *ud, const struct fp_store_drop *d)
{
        if (strcmp(d->reason, "evicted") == 0)
                *(uint64_t *)ud += d->count;
        return 0;
}

/* Samples stored plus samples counted as evicted: what was written, accounted. */
static int64_t accounted(struct fp_store *s)
{
        struct fp_pprof *p = fp_pprof_new();
        uint64_t evicted = 0;
        int64_t stored = -1;

        if (p && fp_store_query_pprof(s, NULL, p) >= 0 &&
            fp_store_drop_totals(s, NULL, add_drop, &evicted) >= 0)
                stored = fp_pprof_n_sample_types(p) ? fp_pprof_total(p, 0) : 0;
        fp_pprof_free(p);
        return stored < 0 ? -1 : stored + (int64_t)evicted;
}

static int64_t sql_int(const char *path, const char *sql)
{
        sqlite3 *db;
        sqlite3_stmt *st;
        int64_t v = -1;

        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
                return -1;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
                if (sqlite3_step(st) == SQLITE_ROW)
                        v = sqlite3_column_type(st, 0) == SQLITE_TEXT
                                ? strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0
                                : sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
        }
        sqlite3_close(db);
        return v;
}

static bool integrity_ok(const char *path)
{
        return sql_int(path, "PRAGMA integrity_check") == 1;
}

static void copy_file(const char *from, const char *to)
{
        char buf[65536];
        int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ssize_t n;

        FP_CHECK(in >= 0 && out >= 0);
        while ((n = read(in, buf, sizeof(buf))) > 0)
                FP_CHECK(write(out, buf, (size_t)n) == n);
        close(in);
        close(out);
}

static void remove_store(const char *path)
{
        char p[256];

        unlink(path);
        snprintf(p, sizeof(p), "%s-wal", path);
        unlink(p);
        snprintf(p, sizeof(p), "%s-shm", path);
        unlink(p);
}

/* ---- injected I/O errors ---- */

#define FAULT_BUDGET ((uint64_t)512 << 10)

/* What a bucket holds: its samples and its drops (when it was uploaded, they left with it). */
static int64_t bucket_content(struct fp_store *s, int64_t id)
{
        struct fp_store_filter f = {.bucket_min = id, .bucket_max = id};
        struct fp_pprof *p = fp_pprof_new();
        uint64_t drops = 0;
        int64_t stored = -1;

        if (p && fp_store_query_pprof(s, &f, p) >= 0 &&
            fp_store_drop_totals(s, &f, add_drop, &drops) >= 0)
                stored = fp_pprof_n_sample_types(p) ? fp_pprof_total(p, 0) : 0;
        fp_pprof_free(p);
        return stored + (int64_t)drops;
}

/* The bucket the sequence marked uploaded, and what it held. */
static int64_t uploaded_id, uploaded_content;

/*
 * The sequence run under faults. Returns the samples of the writes that
 * reported success, or -1 when the store could not be opened.
 */
static int64_t fault_sequence(const char *path, bool *ret_failed)
{
        struct fp_store *s = NULL;
        struct fp_store_bucket pend[2];
        char err[512];
        int64_t ok = 0;
        int r;

        *ret_failed = false;
        r = fp_store_open(path, FAULT_BUDGET, &s, err, sizeof(err));
        if (r < 0) {
                *ret_failed = true;
                FP_CHECK(r == -EIO || r == -ENOSPC);
                return -1;
        }
        FP_CHECK_EQ_INT(r, 0);
        for (unsigned i = 0; i < 3; i++) {
                r = write_batch(s, T0 + (100 + i) * 10 * SEC, 10000 + i * 150, 150, 2);
                if (r == 0) {
                        ok += 300;
                } else {
                        *ret_failed = true;
                        FP_CHECK(r == -EIO || r == -ENOSPC);
                        FP_CHECK(fp_store_errmsg(s)[0] != '\0');
                }
        }
        uploaded_id = 0;
        r = fp_store_pending_uploads(s, pend, 1);
        if (r == 1) {
                enum fault_mode mode = fault_mode;
                fault_mode = FAULT_OFF; /* reading only, to know what the upload takes away */
                uploaded_content = bucket_content(s, pend[0].id);
                fault_mode = mode;
                r = fp_store_mark_uploaded(s, &pend[0].id, 1);
                if (r == 1)
                        uploaded_id = pend[0].id;
                else
                        *ret_failed = true;
        } else {
                *ret_failed = true;
        }
        if (fp_store_gc(s) < 0)
                *ret_failed = true;

        /* The failures are over: the same handle must take a write. */
        fault_mode = FAULT_OFF;
        r = write_batch(s, T0 + 200 * 10 * SEC, 20000, 50, 1);
        FP_CHECK_EQ_INT(r, 0);
        if (r == 0)
                ok += 50;
        fp_store_close(s);
        return ok;
}

static void test_injected_faults(void)
{
        static const struct {
                enum fault_mode mode;
                int rc;
                const char *name;
        } modes[] = {
            {FAULT_ONCE, SQLITE_IOERR_WRITE, "one I/O error"},
            {FAULT_ONCE, SQLITE_FULL, "one disk-full error"},
            {FAULT_FROM, SQLITE_IOERR_WRITE, "I/O errors from then on"},
        };
        char tpl[128], path[128];
        struct fp_store *s = NULL;
        char err[512];
        int64_t base;
        long total_ops;

        snprintf(tpl, sizeof(tpl), "%s/template.db", dir);
        snprintf(path, sizeof(path), "%s/fault.db", dir);
        /* A template near its budget, so the sequence evicts, vacuums and checkpoints. */
        FP_CHECK_EQ_INT(fp_store_open(tpl, FAULT_BUDGET, &s, err, sizeof(err)), 0);
        for (unsigned i = 0; i < 8; i++)
                FP_CHECK_EQ_INT(write_batch(s, T0 + i * 10 * SEC, i * 150, 150, 2), 0);
        base = accounted(s);
        fp_store_close(s);
        FP_CHECK(base > 0);

        /* How many write-side calls the sequence makes without faults. */
        remove_store(path);
        copy_file(tpl, path);
        bool failed;
        fault_arm(FAULT_ONCE, -1, SQLITE_IOERR_WRITE);
        FP_CHECK_EQ_INT(fault_sequence(path, &failed), 3 * 300 + 50);
        total_ops = fault_ops;
        printf("fault injection: the sequence makes %ld write/sync/truncate calls\n", total_ops);

        for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
                unsigned runs = 0, failures = 0, bad = 0;
                for (long n = 0; n <= total_ops + 1; n += 1 + n / 12) {
                        int64_t ok, got, want;
                        int r;

                        remove_store(path);
                        copy_file(tpl, path);
                        fault_arm(modes[m].mode, n, modes[m].rc);
                        ok = fault_sequence(path, &failed);
                        fault_arm(FAULT_OFF, 0, 0);
                        runs++;
                        failures += failed;

                        /* Reopen clean (not "damaged"), sound, and every success accounted for. */
                        s = NULL;
                        r = fp_store_open(path, 0, &s, err, sizeof(err));
                        FP_CHECK_EQ_INT(r, 0);
                        if (r != 0) {
                                fprintf(stderr, "  %s at call %ld: %s\n", modes[m].name, n, err);
                                bad++;
                                continue;
                        }
                        got = accounted(s);
                        fp_store_close(s);
                        want = base + (ok < 0 ? 0 : ok);
                        /* An uploaded bucket that was evicted took its samples and drops along. */
                        if (ok >= 0 && uploaded_id) {
                                char sql[96];
                                snprintf(sql, sizeof(sql),
                                         "SELECT count(*) FROM buckets WHERE id = %lld",
                                         (long long)uploaded_id);
                                if (sql_int(path, sql) == 0)
                                        want -= uploaded_content;
                        }
                        if (got != want) {
                                fprintf(stderr, "  %s at call %ld: accounted %lld, expected %lld\n",
                                        modes[m].name, n, (long long)got, (long long)want);
                                bad++;
                        }
                        if (!integrity_ok(path)) {
                                fprintf(stderr, "  %s at call %ld: integrity_check failed\n",
                                        modes[m].name, n);
                                bad++;
                        }
                }
                printf("fault injection, %s: %u runs, %u saw a failure, %u inconsistent\n",
                       modes[m].name, runs, failures, bad);
                FP_CHECK_EQ_INT(bad, 0);
                FP_CHECK(failures > runs / 4);
        }
}

/* ---- full and read-only file systems ---- */

static void fs_tests(const char *mnt)
{
        char path[256], filler[256], err[512];
        struct fp_store *s = NULL;
        int r;

        /* A read-only file system: creating fails with -EROFS. */
        if (mount("tmpfs", mnt, "tmpfs", MS_RDONLY, "size=1m") < 0) {
                perror("mount");
                FP_CHECK(!"mount tmpfs read-only");
                return;
        }
        snprintf(path, sizeof(path), "%s/agent.db", mnt);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), -EROFS);
        printf("read-only file system: %s\n", err);
        FP_CHECK(umount(mnt) == 0);

        /* An existing store on a file system remounted read-only. */
        FP_CHECK(mount("tmpfs", mnt, "tmpfs", 0, "size=4m") == 0);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        FP_CHECK_EQ_INT(write_batch(s, T0, 0, 100, 1), 0);
        fp_store_close(s);
        FP_CHECK(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0);
        s = NULL;
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), -EROFS);
        printf("store on a read-only file system: %s\n", err);
        r = fp_store_open_readonly(path, &s, err, sizeof(err));
        printf("read-only handle on a read-only file system: %s\n", r == 0 ? "works" : err);
        if (r == 0) {
                FP_CHECK_EQ_INT(accounted(s), 100);
                fp_store_close(s);
        }
        FP_CHECK(umount(mnt) == 0);

        /* No space at creation. */
        FP_CHECK(mount("tmpfs", mnt, "tmpfs", 0, "size=256k") == 0);
        snprintf(filler, sizeof(filler), "%s/filler", mnt);
        int fd = open(filler, O_WRONLY | O_CREAT, 0644);
        char block[4096] = {0};
        while (write(fd, block, sizeof(block)) > 0)
                ;
        close(fd);
        r = fp_store_open(path, 0, &s, err, sizeof(err));
        FP_CHECK_EQ_INT(r, -ENOSPC);
        printf("full file system at creation: %s\n", err);
        FP_CHECK(umount(mnt) == 0);

        /*
         * The disk fills while writing (another file takes most of it):
         * -ENOSPC, nothing half-written, queries keep working; once the
         * other file is gone, writes resume.
         */
        FP_CHECK(mount("tmpfs", mnt, "tmpfs", 0, "size=4m") == 0);
        fd = open(filler, O_WRONLY | O_CREAT, 0644);
        for (int i = 0; i < 384; i++) /* 1.5 MiB */
                FP_CHECK(write(fd, block, sizeof(block)) == (ssize_t)sizeof(block));
        close(fd);
        FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), 0);
        int64_t ok = 0;
        unsigned full = 0, after = 0, i = 0;
        for (; i < 80 && full < 5; i++) {
                r = write_batch(s, T0 + i * 10 * SEC, i * 300, 300, 1);
                if (r == 0) {
                        ok += 300;
                        after += full > 0;
                } else {
                        FP_CHECK_EQ_INT(r, -ENOSPC);
                        if (!full++)
                                printf("disk full while writing: %s\n", fp_store_errmsg(s));
                }
        }
        FP_CHECK(full > 0);
        FP_CHECK_EQ_INT(accounted(s), ok);
        struct fp_store_stats st;
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        printf("disk full while writing: %u writes failed, %u succeeded after the first "
               "failure; budget lowered to %llu KiB\n",
               full, after, (unsigned long long)st.max_bytes / 1024);
        FP_CHECK(unlink(filler) == 0);
        for (unsigned k = 0; k < 10; k++, i++) {
                r = write_batch(s, T0 + i * 10 * SEC, i * 300, 300, 1);
                FP_CHECK_EQ_INT(r, 0);
                if (r == 0)
                        ok += 300;
        }
        FP_CHECK_EQ_INT(accounted(s), ok);
        FP_CHECK_EQ_INT(fp_store_stats(s, &st), 0);
        FP_CHECK(st.file_bytes + st.wal_bytes <= st.max_bytes + st.max_bytes / 2);
        fp_store_close(s);
        FP_CHECK(integrity_ok(path));
        FP_CHECK(umount(mnt) == 0);
}

static void test_file_systems(void)
{
        char mnt[128];
        pid_t pid;
        int status;

        if (geteuid() != 0) {
                /* Without root a mode-0555 directory does the read-only part. */
                struct fp_store *s = NULL;
                char path[256], err[512];
                snprintf(mnt, sizeof(mnt), "%s/ro", dir);
                FP_CHECK(mkdir(mnt, 0555) == 0);
                snprintf(path, sizeof(path), "%s/agent.db", mnt);
                FP_CHECK_EQ_INT(fp_store_open(path, 0, &s, err, sizeof(err)), -EACCES);
                printf("read-only directory: %s\n", err);
                printf("note: not root: full and read-only file systems not tested\n");
                return;
        }
        snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
        FP_CHECK(mkdir(mnt, 0755) == 0);
        fflush(stdout);
        pid = fork();
        if (pid == 0) {
                if (unshare(CLONE_NEWNS) < 0 ||
                    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        _exit(77);
                fs_tests(mnt);
                fflush(stdout);
                _exit(fp_test_failed ? 1 : 0);
        }
        FP_CHECK(pid > 0);
        FP_CHECK(waitpid(pid, &status, 0) == pid);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
                printf("note: no private mount namespace (unshare): file system tests skipped\n");
                return;
        }
        FP_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- kill -9 ---- */

#define KILL_COUNT 200 /* samples per batch: 100 stacks x 2 */

static void writer_child(const char *path, int fd, unsigned round)
{
        struct fp_store *s = NULL;
        char err[512];

        if (fp_store_open(path, (uint64_t)1 << 20, &s, err, sizeof(err)) < 0)
                _exit(2);
        for (unsigned i = 0;; i++) {
                unsigned k = round * 100000 + i;
                if (write_batch(s, T0 + (int64_t)k * 10 * SEC, k * 100 % 1000000, 100, 2) != 0)
                        _exit(3);
                if (write(fd, "x", 1) != 1)
                        _exit(4);
        }
}

static void test_kill9(void)
{
        char path[128], err[512];
        int64_t before = 0;

        snprintf(path, sizeof(path), "%s/kill9.db", dir);
        srand((unsigned)time(NULL));
        for (unsigned round = 0; round < 8; round++) {
                struct fp_store *s = NULL;
                int p[2], status;
                char buf[4096];
                ssize_t n;
                int64_t reported = 0, now;
                pid_t pid;

                FP_CHECK(pipe(p) == 0);
                pid = fork();
                if (pid == 0) {
                        close(p[0]);
                        writer_child(path, p[1], round);
                }
                close(p[1]);
                usleep(50000 + (useconds_t)(rand() % 400000));
                kill(pid, SIGKILL);
                while ((n = read(p[0], buf, sizeof(buf))) > 0)
                        reported += n;
                close(p[0]);
                FP_CHECK(waitpid(pid, &status, 0) == pid);
                FP_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

                FP_CHECK_EQ_INT(fp_store_open(path, (uint64_t)1 << 20, &s, err, sizeof(err)), 0);
                now = s ? accounted(s) : -1;
                fp_store_close(s);
                /* Every reported write is there; one more may have committed unreported. */
                if (now != before + reported * KILL_COUNT)
                        FP_CHECK_EQ_INT(now, before + (reported + 1) * KILL_COUNT);
                FP_CHECK(integrity_ok(path));
                /* Whole buckets only. */
                FP_CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM (SELECT sum(count) AS c FROM"
                                              " bucket_series GROUP BY bucket_id) WHERE c != 200"),
                                0);
                FP_CHECK_EQ_INT(sql_int(path, "SELECT count(*) FROM buckets WHERE id NOT IN"
                                              " (SELECT bucket_id FROM bucket_series)"),
                                0);
                printf("kill -9 round %u: %lld batches reported, store accounts for %lld samples\n",
                       round, (long long)reported, (long long)now);
                before = now;
        }
}

int main(void)
{
        char cmd[128];

        snprintf(dir, sizeof(dir), "/tmp/fp-test-store-faults-XXXXXX");
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        test_kill9();
        test_file_systems();
        shim_install();
        test_injected_faults();

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
        return FP_TEST_DONE();
}
