/* SPDX-License-Identifier: MIT */
/*
 * A target's open bucket exported: to a pprof profile (dumps: frames
 * symbolized into locations, counters into sample types, thread and
 * process labels) and to a store batch (closing the bucket), with the
 * drops counted since the last bucket and those charged for the next; see
 * export.h. It reads the target through target.h only and names frames
 * through the mappings (maps.h) and, for JIT code, the target's perf map.
 */
#include "export.h"
#include "gopclntab.h"
#include "upload_contract.h"
#include "aggregate.h"
#include "demangle.h"
#include "maps.h"
#include "offcpu.h"
#include "pprof.h"
#include "pyframes.h"
#include "runtimes.h"
#include "store.h"
#include "symbols.h"
#include "host.h"
#include "target.h"
#include "unwind.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(FP_EXPORT_MAX_FRAMES == 2 * FP_TARGET_MAX_FRAMES,
               "a stack's frames and as many inlined");
_Static_assert(FP_EXPORT_MAX_FRAMES <= FP_STORE_MAX_FRAMES, "an exported stack fits a batch");

static const char *basename_of(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* What one frame is, for people: its function name and mapping. */
struct frame_desc {
        const char *function;             /* never NULL */
        const char *system_name;          /* the symbol when function is it demangled, else NULL */
        const char *filename;             /* the source file (Python frames), else NULL */
        int64_t start_line, line;         /* the function's first line and the frame's, 0 unknown */
        const struct fp_mapping *mapping; /* NULL: none */
        const char *build_id;             /* "" when unknown */
        uint64_t limit;                   /* mapping end for the profile */
        bool no_address;                  /* an interpreted Java method: no code address */
        char buf[512];
};

/* Names JIT code (ctx: what the callback needs), NULL when it cannot. */
typedef const char *(*jit_name_fn)(void *ctx, uint64_t addr);

static const char *target_jit_name(void *ctx, uint64_t addr)
{
        return fp_target_jit_name(ctx, addr); /* by the runtime's perf map */
}

static const char *host_jit_name(void *ctx, uint64_t addr)
{
        return fp_host_proc_jit_name(ctx, addr);
}

/*
 * What names a process's frames: its mappings, JIT code, interpreted Java
 * methods (ctx: jit_ctx), Python code (NULL: none).
 */
struct namer {
        struct fp_maps *maps;
        jit_name_fn jit;
        const char *(*java)(void *ctx, uint64_t method);
        void *jit_ctx;
        const struct fp_pyframes *py;
};

enum {
        KIND_KERNEL = FP_SYM_SOURCES,
        KIND_JIT,
        KIND_JAVA,
        KIND_PYTHON,
        KIND_RUNTIME,
        KIND_PHP,
        KIND_RUBY,
        KIND_PERL,
        KIND_UNNAMED
};

static uint64_t names_by_kind[FP_EXPORT_NAME_KINDS];

const char *fp_export_name_kind(int kind)
{
        static const char *const extra[] = {"kernel", "jit",  "java", "python", "javascript",
                                            "php",    "ruby", "perl", "unnamed"};

        if (kind < FP_SYM_SOURCES)
                return fp_sym_source_name((enum fp_sym_source)kind);
        return kind < FP_EXPORT_NAME_KINDS ? extra[kind - FP_SYM_SOURCES] : "?";
}

void fp_export_names(uint64_t out[FP_EXPORT_NAME_KINDS])
{
        for (int i = 0; i < FP_EXPORT_NAME_KINDS; i++)
                out[i] = __atomic_load_n(&names_by_kind[i], __ATOMIC_RELAXED);
}

static void count_name(int kind)
{
        __atomic_add_fetch(&names_by_kind[kind], 1, __ATOMIC_RELAXED);
}

static void describe(const struct namer *nm, const struct fp_frame *f, struct frame_desc *d)
{
        uint64_t off = 0;

        d->mapping = NULL;
        d->system_name = NULL;
        d->filename = NULL;
        d->start_line = d->line = 0;
        d->build_id = "";
        d->limit = 0;
        d->no_address = false;
        if (f->flags & FP_FRAME_JAVA) {
                /* A Java method (its Method*): a name, no code address of its own. */
                d->function = nm->java ? nm->java(nm->jit_ctx, f->addr) : NULL;
                count_name(d->function ? KIND_JAVA : KIND_UNNAMED);
                if (!d->function)
                        d->function = "[java]"; /* its method could not be read */
                d->no_address = true;
                return;
        }
        if (f->flags & FP_FRAME_RUNTIME) {
                /* A JavaScript function (runtimes.h): its name, file and first line. */
                struct fp_rt_name rn;
                if (fp_runtimes_name(nm->maps, f, &rn)) {
                        d->function = rn.function;
                        d->filename = rn.filename;
                        d->start_line = d->line = rn.line;
                        count_name(KIND_RUNTIME);
                } else {
                        d->function = "[runtime]";
                        count_name(KIND_UNNAMED);
                }
                d->no_address = true;
                return;
        }
        if (f->flags & FP_FRAME_PYTHON) {
                struct fp_pyframe_name pn = {.function = "[python]"};
                if (nm->py)
                        fp_pyframes_name(nm->py, f, &pn);
                d->function = pn.function;
                static const int by_kind[FP_PYSTACK_KINDS] = {[FP_PYSTACK_PYTHON] = KIND_PYTHON,
                                                              [FP_PYSTACK_PHP] = KIND_PHP,
                                                              [FP_PYSTACK_RUBY] = KIND_RUBY,
                                                              [FP_PYSTACK_PERL] = KIND_PERL};
                count_name(!pn.named ? KIND_UNNAMED : by_kind[fp_pyframes_kind(nm->py)]);
                d->system_name = pn.system_name;
                d->filename = pn.filename;
                d->start_line = pn.start_line;
                d->line = pn.line;
                return;
        }
        if (f->flags & FP_FRAME_KERNEL_TIME) {
                d->function = "[kernel]";
                return;
        }
        if (f->flags & FP_FRAME_TRUNCATED) {
                d->function = "[truncated]";
                return;
        }
        if (f->flags & FP_FRAME_OVERFLOW) {
                d->function = "[stack table full]";
                return;
        }
        if (f->flags & FP_FRAME_THREAD_EXIT) {
                d->function = "[thread exit]";
                return;
        }
        if (f->flags & FP_FRAME_THREAD_START) {
                d->function = "[thread start]";
                return;
        }
        if (!f->mapping) {
                d->function = "[unknown]";
                return;
        }
        struct fp_mapping *x = fp_maps_get(nm->maps, f->mapping);
        d->function = fp_maps_symbolize(nm->maps, f->mapping, f->addr, &off);
        const char *dm = fp_demangle(d->function);
        if (dm) {
                d->system_name = d->function;
                d->function = dm;
        }
        if (d->function)
                count_name(x->kind == FP_MAPPING_KERNEL ? KIND_KERNEL
                                                        : (int)fp_symtab_source(x->symtab));
        if (!d->function && x->kind == FP_MAPPING_ANON && nm->jit) {
                d->function = nm->jit(nm->jit_ctx, f->addr);
                if (d->function)
                        count_name(KIND_JIT);
        }
        if (!d->function)
                count_name(KIND_UNNAMED);
        d->mapping = x;
        d->build_id = x->symtab ? fp_symtab_build_id(x->symtab) : "";
        d->limit = x->kind == FP_MAPPING_KERNEL ? UINT64_MAX : x->end;
        if (!d->function) {
                snprintf(d->buf, sizeof(d->buf), "%s+0x%" PRIx64, basename_of(x->path), off);
                d->function = d->buf;
        }
}

/*
 * The frames f stands for into d (room of them, at least 1), innermost
 * first: the calls a Go compiler inlined at its address (gopclntab.h),
 * each a frame at that address, then f's own function. Returns how many.
 */
static size_t describe_all(const struct namer *nm, const struct fp_frame *f, struct frame_desc *d,
                           size_t room)
{
        const char *inl[FP_GOPCLN_MAX_INLINE];
        size_t n = 0;

        if (f->mapping && room > 1 &&
            !(f->flags & (FP_FRAME_PYTHON | FP_FRAME_JAVA | FP_FRAME_RUNTIME)))
                n = fp_maps_inlined(nm->maps, f->mapping, f->addr, inl,
                                    room - 1 < FP_GOPCLN_MAX_INLINE ? room - 1
                                                                    : FP_GOPCLN_MAX_INLINE);
        describe(nm, f, &d[n]);
        for (size_t i = 0; i < n; i++) {
                d[i] = (struct frame_desc){.function = inl[i],
                                           .mapping = d[n].mapping,
                                           .build_id = d[n].build_id,
                                           .limit = d[n].limit};
                count_name(FP_SYM_SOURCE_PCLNTAB);
        }
        return n + 1;
}

static struct namer target_namer(struct fp_target *t)
{
        bool on;
        uint64_t attach_failed;

        return (struct namer){.maps = fp_target_maps(t),
                              .jit = target_jit_name,
                              .java = fp_target_java_method,
                              .jit_ctx = t,
                              .py = fp_target_python(t, &on, &attach_failed)};
}

static struct namer host_namer(struct fp_host_proc *p)
{
        return (struct namer){.maps = fp_host_proc_maps(p),
                              .jit = host_jit_name,
                              .java = fp_host_proc_java_method,
                              .jit_ctx = p,
                              .py = fp_host_proc_python(p)};
}

/*
 * The ELF address of d's mapping's start, plus one (0: unknown): what a
 * debug file needs beside the address to name a stripped build's frame.
 * Placed by the frame's own address addr, not by the mapping's first
 * byte: a segment's first page may also hold the end of the segment
 * before it (Rust's and lld's layouts: the read-only segment ends at file
 * offset 0x16dd0, the code begins there at 0x17dd0), and the page's
 * offset alone then reads as the other segment's.
 */
static uint64_t mapping_vaddr1(const struct frame_desc *d, uint64_t addr)
{
        const struct fp_mapping *m = d->mapping;
        uint64_t vaddr, in;

        if (!m || m->kind != FP_MAPPING_FILE || !d->build_id[0] || addr < m->start)
                return 0;
        in = addr - m->start;
        if (fp_symtab_offset_to_vaddr(m->symtab, m->pgoff + in, &vaddr) < 0 || vaddr < in ||
            vaddr - in == UINT64_MAX)
                return 0;
        return vaddr - in + 1;
}

/* The store's frame of a described one. */
static struct fp_store_frame store_frame(const struct frame_desc *d, const struct fp_frame *f)
{
        return (struct fp_store_frame){.function = d->function,
                                       .system_name = d->system_name,
                                       .mapping_file = d->mapping ? d->mapping->path : NULL,
                                       .build_id = d->build_id,
                                       .mapping_start = d->mapping ? d->mapping->start : 0,
                                       .mapping_limit = d->limit,
                                       .mapping_offset = d->mapping ? d->mapping->pgoff : 0,
                                       .mapping_vaddr1 = mapping_vaddr1(d, f->addr),
                                       .address = d->filename || d->no_address ? 0 : f->addr,
                                       .filename = d->filename,
                                       .line = d->line};
}

/*
 * The store frames of one stack (leaf first), inlined calls among them,
 * into frames (FP_EXPORT_MAX_FRAMES); their count. The stack's own frames
 * always fit: inlined calls are left out past the room.
 */
static size_t stack_frames(const struct namer *nm, const struct fp_agg_entry *e,
                           struct fp_store_frame *frames, struct frame_desc *descs)
{
        size_t n = 0;

        for (uint32_t j = 0; j < e->n_frames; j++) {
                size_t k = describe_all(nm, &e->frames[j], &descs[n],
                                        FP_EXPORT_MAX_FRAMES - n - (e->n_frames - 1 - j));
                for (size_t i = 0; i < k; i++)
                        frames[n + i] = store_frame(&descs[n + i], &e->frames[j]);
                n += k;
        }
        return n;
}

/* The pprof location of one described frame, interning its mapping and function. */
static int frame_location(struct fp_pprof *p, const struct frame_desc *d, const struct fp_frame *f,
                          uint64_t *mapping_ids, uint64_t *ret_loc)
{
        uint64_t mapping_id = 0, function_id = 0;
        int r;

        if (d->mapping) {
                if (!mapping_ids[f->mapping - 1]) {
                        r = fp_pprof_mapping(p, d->mapping->start, d->limit, d->mapping->pgoff,
                                             d->mapping->path, d->build_id,
                                             &mapping_ids[f->mapping - 1]);
                        if (r < 0)
                                return r;
                        /* Where the file's own addresses begin: its debug file names the rest. */
                        uint64_t vaddr1 = mapping_vaddr1(d, f->addr);
                        if (vaddr1)
                                (void)fp_pprof_mapping_set_vaddr(p, mapping_ids[f->mapping - 1],
                                                                 vaddr1 - 1);
                }
                mapping_id = mapping_ids[f->mapping - 1];
        }
        r = fp_pprof_function_full(p, d->function, d->system_name, d->filename, d->start_line,
                                   &function_id);
        if (r < 0)
                return r;
        if (d->filename || d->no_address) /* Python, interpreted Java: a function, no address */
                return fp_pprof_location_at(p, mapping_id, 0, function_id, d->line, ret_loc);
        return fp_pprof_location(p, mapping_id, f->addr, function_id, ret_loc);
}

/*
 * The pprof locations of one stack (leaf first), inlined calls among them,
 * into locs (FP_EXPORT_MAX_FRAMES): their count, or -errno. An inlined
 * call is a location of its own at its frame's address.
 */
static int stack_locations(const struct namer *nm, struct fp_pprof *p, const struct fp_agg_entry *e,
                           uint64_t *mapping_ids, uint64_t *locs)
{
        struct frame_desc d[FP_GOPCLN_MAX_INLINE + 1];
        size_t n = 0;

        for (uint32_t j = 0; j < e->n_frames; j++) {
                size_t room = FP_EXPORT_MAX_FRAMES - n - (e->n_frames - 1 - j);
                size_t k =
                    describe_all(nm, &e->frames[j], d,
                                 room < FP_GOPCLN_MAX_INLINE + 1 ? room : FP_GOPCLN_MAX_INLINE + 1);
                for (size_t i = 0; i < k; i++) {
                        int r = frame_location(p, &d[i], &e->frames[j], mapping_ids, &locs[n++]);
                        if (r < 0)
                                return r;
                }
        }
        return (int)n;
}

/* Where each counter goes among p's sample types (added when missing). */
static int counter_columns(struct fp_target *t, struct fp_pprof *p, size_t *ret)
{
        for (unsigned i = 0; i < fp_target_config(t)->n_members; i++) {
                const char *type, *unit;
                fp_target_counter_type(t, i, &type, &unit);
                int r = fp_pprof_find_sample_type(p, type, unit);
                if (r == -ENOENT)
                        r = fp_pprof_add_sample_type(p, type, unit);
                if (r < 0)
                        return r;
                ret[i] = (size_t)r;
        }
        return 0;
}

static int64_t clamp64(uint64_t v)
{
        return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/*
 * The stacks of agg into p: count and value in its first two sample
 * types, the counters (n_members) in column; the threads waiting for
 * wait (NULL: running).
 */
static int pprof_stacks(struct fp_target *t, struct fp_pprof *p, const struct fp_agg *agg,
                        const size_t *column, unsigned n_members, const char *wait)
{
        const char *service = fp_target_service(t);
        const struct namer nm = target_namer(t);
        size_t n_maps = fp_maps_count(fp_target_maps(t));
        uint64_t *mapping_ids = calloc(n_maps ? n_maps : 1, sizeof(*mapping_ids));
        uint64_t *locs = malloc(FP_EXPORT_MAX_FRAMES * sizeof(*locs));
        int64_t *values = calloc(fp_pprof_n_sample_types(p), sizeof(*values));
        int r = 0;

        if (!mapping_ids || !locs || !values) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < fp_agg_n_entries(agg); i++) {
                const struct fp_agg_entry *e = fp_agg_entry(agg, i);
                struct fp_pprof_label labels[6] = {
                    {.key = "thread", .num = e->tid},
                    {.key = "thread_name", .str = fp_target_thread_name(t, e->tid)},
                    {.key = "pid", .num = fp_target_pid(t)},
                    {.key = "process", .str = fp_target_comm(t)},
                };
                size_t n_labels = 4;
                if (service[0])
                        labels[n_labels++] =
                            (struct fp_pprof_label){.key = "service", .str = service};
                if (wait)
                        labels[n_labels++] = (struct fp_pprof_label){.key = "wait", .str = wait};
                values[0] = clamp64(e->count);
                values[1] = clamp64(e->value);
                for (unsigned j = 0; j < n_members; j++)
                        values[column[j]] = clamp64(e->counters[j]);
                int n = stack_locations(&nm, p, e, mapping_ids, locs);
                r = n < 0 ? n : fp_pprof_add_sample(p, locs, (size_t)n, values, labels, n_labels);
                if (r < 0)
                        goto out;
        }
out:
        free(mapping_ids);
        free(locs);
        free(values);
        return r;
}

int fp_export_pprof(struct fp_target *t, struct fp_pprof *p)
{
        size_t column[FP_PERF_MAX_MEMBERS];
        int r = counter_columns(t, p, column);

        if (r < 0)
                return r;
        return pprof_stacks(t, p, fp_target_bucket(t), column, fp_target_config(t)->n_members,
                            NULL);
}

int fp_export_wall_pprof(struct fp_target *t, struct fp_pprof *p)
{
        int r = pprof_stacks(t, p, fp_target_bucket(t), NULL, 0, NULL);
        return r < 0 ? r : fp_export_offcpu_pprof(t, p);
}

int fp_export_offcpu_pprof(struct fp_target *t, struct fp_pprof *p)
{
        static const char *const waits[FP_OFFCPU_REASONS] = FP_STORE_WAITS;
        int r = 0;

        for (unsigned i = 0; r == 0 && fp_target_offcpu_bucket(t, i) && i < FP_OFFCPU_REASONS; i++)
                r = pprof_stacks(t, p, fp_target_offcpu_bucket(t, i), NULL, 0, waits[i]);
        return r;
}

/*
 * The stacks of agg into the batch as samples of (target ti, event ei),
 * and their counters of the events member_ei (n of them); the threads
 * waiting for wait (NULL: running).
 */
static int batch_stacks(struct fp_target *t, struct fp_store_batch *b, uint32_t ti, uint32_t ei,
                        const uint32_t *member_ei, unsigned n_members, const struct fp_agg *agg,
                        const char *wait, struct fp_store_frame *frames, struct frame_desc *descs)
{
        const struct namer nm = target_namer(t);
        uint32_t si;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < fp_agg_n_entries(agg); i++) {
                const struct fp_agg_entry *e = fp_agg_entry(agg, i);
                const char *thread_name = fp_target_thread_name(t, e->tid);
                r = fp_store_batch_add_stack(b, frames, stack_frames(&nm, e, frames, descs), &si);
                if (r < 0)
                        break;
                r = fp_store_batch_add_waiting(b, ti, ei, e->tid, thread_name, wait, si, e->count,
                                               e->value);
                for (unsigned j = 0; r >= 0 && j < n_members; j++)
                        if (e->counters[j])
                                r = fp_store_batch_add_sample(b, ti, member_ei[j], e->tid,
                                                              thread_name, si, e->count,
                                                              e->counters[j]);
        }
        return r;
}

/* The open bucket's off-CPU time (when profiled): event "off-cpu", in ns, by why they waited. */
static int batch_offcpu(struct fp_target *t, struct fp_store_batch *b, uint32_t ti,
                        struct fp_store_frame *frames, struct frame_desc *descs)
{
        static const char *const waits[FP_OFFCPU_REASONS] = FP_STORE_WAITS;
        const struct fp_perf_config *cfg = fp_target_config(t);
        struct fp_store_event ev = {.name = FP_STORE_OFFCPU_EVENT,
                                    .count_type = "samples",
                                    .count_unit = "count",
                                    .value_type = "off-cpu",
                                    .value_unit = "nanoseconds",
                                    .period_type = "off-cpu",
                                    .period_unit = "nanoseconds",
                                    .period = (int64_t)cfg->off_cpu_period};
        uint32_t ei;
        int r;

        if (!fp_target_offcpu_bucket(t, 0))
                return 0;
        if ((r = fp_store_batch_add_event(b, &ev, &ei)) < 0)
                return r;
        for (unsigned i = 0; r >= 0 && i < FP_OFFCPU_REASONS; i++)
                r = batch_stacks(t, b, ti, ei, NULL, 0, fp_target_offcpu_bucket(t, i), waits[i],
                                 frames, descs);
        return r;
}

/* Adds one bucket drop count unless it is zero. */
static int batch_drop(struct fp_store_batch *b, uint32_t ti, const char *reason, uint64_t n)
{
        return n ? fp_store_batch_add_drop(b, ti, reason, n) : 0;
}

struct fp_store_target fp_export_target_row(struct fp_target *t, const char *config, bool active)
{
        return (struct fp_store_target){.host = NULL,
                                        .pid = fp_target_pid(t),
                                        .starttime = fp_target_starttime(t),
                                        .comm = fp_target_comm(t),
                                        .exe = fp_target_exe(t),
                                        .config = config,
                                        .active = active,
                                        .service = fp_target_service(t),
                                        .has_guard = true,
                                        .guard = fp_target_guarded_for(t)};
}

int fp_export_batch(struct fp_target *t, struct fp_store_batch *b, bool active)
{
        const struct fp_perf_config *cfg = fp_target_config(t);
        struct fp_store_frame *frames = NULL;
        struct frame_desc *descs = NULL;
        const char *types[2], *units[2];
        char config[FP_PERF_EVENT_LIST_MAX + 128];
        uint32_t ti, ei, member_ei[FP_PERF_MAX_MEMBERS];
        int r;

        fp_demangle_trim(); /* no demangled name is held between exports */
        fp_target_drain(t);
        fp_target_config_string(t, config, sizeof(config));
        fp_target_sample_types(t, types, units);
        struct fp_store_target st = fp_export_target_row(t, config, active);
        struct fp_store_event ev = {.name = cfg->event.name,
                                    .count_type = types[0],
                                    .count_unit = units[0],
                                    .value_type = types[1],
                                    .value_unit = units[1],
                                    .period_type = types[1],
                                    .period_unit = units[1],
                                    .period = (int64_t)(cfg->freq ? 1 : cfg->period)};
        r = fp_store_batch_add_target(b, &st, &ti);
        if (r < 0)
                return r;
        r = fp_store_batch_add_event(b, &ev, &ei);
        if (r == 0)
                r = fp_store_batch_set_series(b, ti, ei); /* its drops travel even with no sample */
        if (r < 0)
                return r;
        for (unsigned j = 0; j < cfg->n_members; j++) {
                struct fp_store_event mev = {
                    .name = cfg->members[j].name, .count_type = types[0], .count_unit = units[0]};
                fp_target_counter_type(t, j, &mev.value_type, &mev.value_unit);
                r = fp_store_batch_add_event(b, &mev, &member_ei[j]);
                if (r < 0)
                        return r;
        }
        frames = malloc(FP_EXPORT_MAX_FRAMES * sizeof(*frames));
        descs = malloc(FP_EXPORT_MAX_FRAMES * sizeof(*descs));
        if (!frames || !descs) {
                r = -ENOMEM;
                goto out;
        }
        r = batch_stacks(t, b, ti, ei, member_ei, cfg->n_members, fp_target_bucket(t), NULL, frames,
                         descs);
        if (r >= 0)
                r = batch_offcpu(t, b, ti, frames, descs);
        if (r < 0)
                goto out;
        struct fp_target_drop drops[FP_TARGET_MAX_DROPS];
        size_t n_drops = fp_target_open_drops(t, drops, FP_TARGET_MAX_DROPS);
        for (size_t i = 0; i < n_drops; i++)
                if ((r = batch_drop(b, ti, drops[i].reason, drops[i].count)) < 0)
                        goto out;
        /* Everything is in the batch: start the next bucket empty. */
        r = fp_target_next_bucket(t);
        if (r < 0)
                goto out;
        r = (int)ti;
out:
        free(frames);
        free(descs);
        return r;
}

/* ---- the host tier ---- */

/* A series of the host tier: a service, an executable and a container. */
struct host_series {
        const char *service, *exe, *container; /* the first process's: valid during the export */
        uint32_t ti;
};

/* The host tier's configuration text: the samplers' and the tier's mark. */
static void host_config(struct fp_host *h, char *buf, size_t len)
{
        const struct fp_host_config *c = fp_host_config(h);
        int n = snprintf(buf, len,
                         "event=cpu-clock freq=%" PRIu64 " period=0 kernel=%d unwind=%s tier=host",
                         c->freq, c->kernel_frames ? 1 : 0, fp_unwind_mode_name(c->unwind));
        if (c->off_cpu_period && n > 0 && (size_t)n < len)
                snprintf(buf + n, len - (size_t)n, " off_cpu=%" PRIu64, c->off_cpu_period);
}

/* Whether generation p has anything in the open bucket: CPU samples or off-CPU time. */
static bool host_proc_has_data(const struct fp_host_proc *p)
{
        for (unsigned i = 0; i < FP_OFFCPU_REASONS; i++)
                if (fp_host_proc_offcpu(p, i))
                        return true;
        return fp_host_proc_bucket(p) != NULL;
}

/* The stacks of one of p's buckets into the batch: samples of (ti, ei), waiting for wait. */
static int host_batch_agg(struct fp_store_batch *b, struct fp_host_proc *p,
                          const struct fp_agg *agg, uint32_t ti, uint32_t ei, const char *wait,
                          struct fp_store_frame *frames, struct frame_desc *descs)
{
        const struct namer nm = host_namer(p);
        uint32_t si;
        int r = 0;

        for (size_t j = 0; agg && r >= 0 && j < fp_agg_n_entries(agg); j++) {
                const struct fp_agg_entry *e = fp_agg_entry(agg, j);
                if ((r = fp_store_batch_add_stack(b, frames, stack_frames(&nm, e, frames, descs),
                                                  &si)) >= 0)
                        r = fp_store_batch_add_waiting(b, ti, ei, e->tid,
                                                       fp_host_proc_thread_name(p, e->tid), wait,
                                                       si, e->count, e->value);
        }
        return r;
}

static int host_target(struct fp_store_batch *b, const char *service, const char *exe,
                       const char *container, const char *comm, const char *config, uint32_t *ret)
{
        struct fp_store_target st = {.host = NULL,
                                     .pid = 0,
                                     .starttime =
                                         fp_upload_host_series_key(service, exe, container),
                                     .comm = comm,
                                     .exe = exe,
                                     .config = config,
                                     .active = false,
                                     .service = service,
                                     .container = container,
                                     .has_guard = true,
                                     .guard = 0};
        return fp_store_batch_add_target(b, &st, ret);
}

static int host_event(struct fp_store_batch *b, uint32_t *ret)
{
        struct fp_store_event ev = {.name = "cpu-clock",
                                    .count_type = "samples",
                                    .count_unit = "count",
                                    .value_type = "cpu",
                                    .value_unit = "nanoseconds",
                                    .period_type = "cpu",
                                    .period_unit = "nanoseconds",
                                    .period = 1};
        return fp_store_batch_add_event(b, &ev, ret);
}

int fp_export_host_batch(struct fp_host *h, struct fp_store_batch *b, uint32_t *ret_idx,
                         size_t max_idx, size_t *ret_n)
{
        struct host_series *series = NULL;
        size_t n_series = 0, cap_series = 0, n_idx = 0;
        struct fp_store_frame *frames = malloc(FP_EXPORT_MAX_FRAMES * sizeof(*frames));
        struct frame_desc *descs = malloc(FP_EXPORT_MAX_FRAMES * sizeof(*descs));
        char config[192];
        uint32_t ei, off_ei = 0, carrier;
        int r;

        fp_demangle_trim(); /* no demangled name is held between exports */
        if (!frames || !descs) {
                r = -ENOMEM;
                goto out;
        }
        fp_host_drain(h);
        host_config(h, config, sizeof(config));
        /* The tier's own series carries its drops (and so travels even when nothing ran). */
        if ((r = host_event(b, &ei)) < 0 ||
            (r = host_target(b, "", "", "", "[host tier]", config, &carrier)) < 0 ||
            (r = fp_store_batch_set_series(b, carrier, ei)) < 0)
                goto out;
        if (fp_host_config(h)->off_cpu_period) {
                struct fp_store_event ev = {.name = FP_STORE_OFFCPU_EVENT,
                                            .count_type = "samples",
                                            .count_unit = "count",
                                            .value_type = "off-cpu",
                                            .value_unit = "nanoseconds",
                                            .period_type = "off-cpu",
                                            .period_unit = "nanoseconds",
                                            .period = (int64_t)fp_host_config(h)->off_cpu_period};
                if ((r = fp_store_batch_add_event(b, &ev, &off_ei)) < 0)
                        goto out;
        }
        if (n_idx < max_idx)
                ret_idx[n_idx++] = carrier;
        for (size_t i = 0; i < fp_host_n_procs(h); i++) {
                struct fp_host_proc *p = fp_host_proc_at(h, i);
                if (!host_proc_has_data(p))
                        continue;
                const char *service = fp_host_proc_service(p), *exe = fp_host_proc_exe(p);
                const char *container = fp_host_proc_container(p);
                size_t k = 0;
                while (k < n_series &&
                       (strcmp(series[k].service, service) || strcmp(series[k].exe, exe) ||
                        strcmp(series[k].container, container)))
                        k++;
                if (k == n_series) {
                        const char *comm = exe[0] ? basename_of(exe) : fp_host_proc_comm(p);
                        if ((r = fp_grow(&series, &cap_series, n_series + 1, sizeof(*series))) <
                                0 ||
                            (r = host_target(b, service, exe, container, comm, config,
                                             &series[k].ti)) < 0)
                                goto out;
                        series[k].service = service;
                        series[k].exe = exe;
                        series[k].container = container;
                        n_series++;
                        if (n_idx < max_idx)
                                ret_idx[n_idx++] = series[k].ti;
                }
                static const char *const waits[FP_OFFCPU_REASONS] = FP_STORE_WAITS;
                r = host_batch_agg(b, p, fp_host_proc_bucket(p), series[k].ti, ei, NULL, frames,
                                   descs);
                for (unsigned w = 0; r >= 0 && w < FP_OFFCPU_REASONS; w++)
                        r = host_batch_agg(b, p, fp_host_proc_offcpu(p, w), series[k].ti, off_ei,
                                           waits[w], frames, descs);
                if (r < 0)
                        goto out;
        }
        struct fp_host_drop drops[FP_HOST_MAX_DROPS];
        size_t n_drops = fp_host_open_drops(h, drops, FP_HOST_MAX_DROPS);
        for (size_t i = 0; i < n_drops; i++)
                if ((r = batch_drop(b, carrier, drops[i].reason, drops[i].count)) < 0)
                        goto out;
        r = fp_host_next_bucket(h);
        if (r == 0 && ret_n)
                *ret_n = n_idx;
out:
        free(series);
        free(frames);
        free(descs);
        return r;
}

/* The stacks of one of proc's buckets into p; the threads waiting for wait (NULL: running). */
static int host_pprof_agg(struct fp_host_proc *proc, struct fp_pprof *p, const struct fp_agg *agg,
                          const char *wait, uint64_t *mapping_ids, uint64_t *locs)
{
        const struct namer nm = host_namer(proc);
        const char *container = fp_host_proc_container(proc);
        int64_t values[2];
        int r = 0;

        for (size_t j = 0; agg && j < fp_agg_n_entries(agg) && r >= 0; j++) {
                const struct fp_agg_entry *e = fp_agg_entry(agg, j);
                int n = stack_locations(&nm, p, e, mapping_ids, locs);
                r = n < 0 ? n : 0;
                values[0] = clamp64(e->count);
                values[1] = clamp64(e->value);
                struct fp_pprof_label labels[7] = {
                    {.key = "thread", .num = e->tid},
                    {.key = "thread_name", .str = fp_host_proc_thread_name(proc, e->tid)},
                    {.key = "pid", .num = fp_host_proc_pid(proc)},
                    {.key = "process", .str = fp_host_proc_comm(proc)},
                    {.key = "service", .str = fp_host_proc_service(proc)},
                };
                size_t n_labels = 5;
                if (container[0])
                        labels[n_labels++] =
                            (struct fp_pprof_label){.key = "container", .str = container};
                if (wait)
                        labels[n_labels++] = (struct fp_pprof_label){.key = "wait", .str = wait};
                if (r >= 0)
                        r = fp_pprof_add_sample(p, locs, (size_t)n, values, labels, n_labels);
        }
        return r;
}

int fp_export_host_pprof(struct fp_host *h, struct fp_pprof *p, const char *service, bool cpu,
                         bool off_cpu)
{
        static const char *const waits[FP_OFFCPU_REASONS] = FP_STORE_WAITS;
        uint64_t *locs = malloc(FP_EXPORT_MAX_FRAMES * sizeof(*locs));
        int r = 0;

        if (!locs)
                return -ENOMEM;
        fp_host_drain(h);
        for (size_t i = 0; i < fp_host_n_procs(h) && r >= 0; i++) {
                struct fp_host_proc *proc = fp_host_proc_at(h, i);
                if (!host_proc_has_data(proc) ||
                    (service && strcmp(service, fp_host_proc_service(proc)) != 0))
                        continue;
                size_t n_maps = fp_maps_count(fp_host_proc_maps(proc));
                uint64_t *mapping_ids = calloc(n_maps ? n_maps : 1, sizeof(*mapping_ids));
                if (!mapping_ids) {
                        r = -ENOMEM;
                        break;
                }
                if (cpu)
                        r = host_pprof_agg(proc, p, fp_host_proc_bucket(proc), NULL, mapping_ids,
                                           locs);
                for (unsigned w = 0; off_cpu && r >= 0 && w < FP_OFFCPU_REASONS; w++)
                        r = host_pprof_agg(proc, p, fp_host_proc_offcpu(proc, w), waits[w],
                                           mapping_ids, locs);
                free(mapping_ids);
        }
        free(locs);
        return r < 0 ? r : 0;
}
