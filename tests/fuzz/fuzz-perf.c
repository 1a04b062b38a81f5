/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the agent's perf record parser: the kernel writes
 * the records, but their contents (stack copies, file names, comms) come
 * from the profiled processes, and a parser bug reads out of the ring. The
 * input is a ring: its first four bytes set the ring's shape (group
 * members, a stack copy, where in the ring the records start, so that
 * records wrap its end), the rest are the records, laid into a ring of
 * 64 KiB behind a metadata page, as fp_perf_ring_drain() reads a mapped
 * one. Every field a handler gets is read, so ASan sees a parser that
 * hands out pointers past the record.
 */
#include "perf.h"

#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DATA_SIZE ((size_t)64 << 10)

static uint64_t sink;

static void on_sample(void *userdata, const struct fp_perf_sample *s)
{
        (void)userdata;
        sink += s->ip + s->pid + s->tid + s->time + s->period + s->d_enabled + s->d_running;
        for (uint64_t i = 0; i < s->nr; i++)
                sink += s->ips[i];
        for (unsigned i = 0; i < s->n_counters && i < FP_PERF_MAX_MEMBERS; i++)
                sink += s->counters[i];
        for (uint64_t i = 0; s->stack && i < s->stack_size; i++)
                sink += s->stack[i];
        sink += s->user_ip + s->user_sp + s->user_bp;
}

static void on_record(void *userdata, const struct fp_perf_record *r)
{
        (void)userdata;
        switch (r->type) {
        case PERF_RECORD_COMM:
                sink += strlen(r->comm.comm);
                break;
        case PERF_RECORD_MMAP:
        case PERF_RECORD_MMAP2:
                sink += strlen(r->mmap.filename) + r->mmap.addr + r->mmap.len;
                break;
        default:
                sink += r->type;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const struct fp_perf_handlers handlers = {on_sample, on_record};
        static const uint32_t stacks[] = {0, 64, 4096, 8192};
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        struct fp_perf_ring r = {.fd = -1, .data_size = DATA_SIZE};
        struct perf_event_mmap_page *meta;
        uint8_t *area;
        size_t start, n;

        if (size < 4 || size - 4 > DATA_SIZE)
                return 0;
        area = calloc(1, page + DATA_SIZE);
        r.scratch = malloc(65536);
        if (!area || !r.scratch) {
                free(area);
                free(r.scratch);
                return 0;
        }
        r.base = area;
        r.n_members = data[0] % (FP_PERF_MAX_MEMBERS + 1);
        r.stack_bytes = stacks[data[1] % 4];
        for (unsigned i = 0; i <= r.n_members; i++)
                r.id[i] = 100 + i;
        start = ((size_t)data[2] << 8 | data[3]) & (DATA_SIZE - 1) & ~(size_t)7;
        n = size - 4;
        for (size_t i = 0; i < n; i++)
                area[page + ((start + i) & (DATA_SIZE - 1))] = data[4 + i];
        meta = (struct perf_event_mmap_page *)area;
        meta->data_tail = start;
        meta->data_head = start + n;
        (void)fp_perf_ring_drain(&r, &handlers, NULL);
        free(area);
        free(r.scratch);
        return 0;
}
