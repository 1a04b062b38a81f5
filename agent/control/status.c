/* SPDX-License-Identifier: MIT */
/*
 * Status rendering, text and JSON; see status.h.
 */
#include "status.h"
#include "escape.h"
#include "json.h"
#include "python.h"
#include "rule.h"
#include "unwind.h"
#include "util.h"

#include <inttypes.h>
#include <string.h>

static const char *state_name(enum fp_target_state st)
{
        return st == FP_TARGET_RUNNING ? "running" : "exited";
}

static uint64_t rate_hz(const struct fp_perf_config *cfg)
{
        if (cfg->freq)
                return cfg->freq;
        return fp_perf_event_is_clock(&cfg->event) ? 1000000000ULL / cfg->period : 0;
}

/* The share of its enabled time the group was on the PMU, in percent; < 0 when unknown. */
static double running_percent(const struct fp_target_stats *st)
{
        if (!st->time_enabled)
                return -1;
        return 100.0 * (double)st->time_running / (double)st->time_enabled;
}

static void format_age(char *buf, size_t len, int64_t then_ns)
{
        if (!then_ns) {
                snprintf(buf, len, "never");
                return;
        }
        int64_t ago = ((int64_t)fp_now_ns(CLOCK_REALTIME) - then_ns) / 1000000000LL;
        snprintf(buf, len, "%" PRId64 "s ago", ago < 0 ? 0 : ago);
}

static void human_bytes(char *buf, size_t len, uint64_t b)
{
        if (b >= 10ULL << 20)
                snprintf(buf, len, "%" PRIu64 " MiB", b >> 20);
        else if (b >= 10ULL << 10)
                snprintf(buf, len, "%" PRIu64 " KiB", b >> 10);
        else
                snprintf(buf, len, "%" PRIu64 " B", b);
}

/* The group of a target in JSON: events, counters, precise_ip, what was left out. */
static void counters_json(struct fp_json *j, const struct fp_core_target_status *ts)
{
        const struct fp_perf_config *cfg = ts->cfg;
        double pct = running_percent(&ts->st);
        char events[FP_PERF_EVENT_LIST_MAX];

        fp_perf_event_list_string(cfg, events, sizeof(events));
        fp_json_key(j, "events");
        fp_json_string(j, events);
        fp_json_key(j, "precise_ip");
        if (fp_perf_event_is_hardware(&cfg->event))
                fp_json_uint(j, cfg->precise_ip);
        else
                fp_json_null(j);
        fp_json_key(j, "left_out");
        fp_json_begin_array(j);
        for (const char *p = ts->left_out; *p;) {
                char name[FP_PERF_EVENT_NAME_MAX + 1];
                size_t n = strcspn(p, ",");
                snprintf(name, sizeof(name), "%.*s", (int)n, p);
                fp_json_string(j, name);
                p += n + (p[n] == ',');
        }
        fp_json_end_array(j);
        fp_json_key(j, "time_enabled_ns");
        fp_json_uint(j, ts->st.time_enabled);
        fp_json_key(j, "time_running_ns");
        fp_json_uint(j, ts->st.time_running);
        fp_json_key(j, "counters");
        fp_json_begin_array(j);
        for (unsigned i = 0; i < cfg->n_members; i++) {
                fp_json_begin_object(j);
                fp_json_key(j, "event");
                fp_json_string(j, cfg->members[i].name);
                fp_json_key(j, "unit");
                fp_json_string(j, fp_perf_event_unit(&cfg->members[i]));
                fp_json_key(j, "value");
                fp_json_uint(j, ts->st.counter_total[i]);
                fp_json_key(j, "running_percent");
                if (pct < 0)
                        fp_json_null(j);
                else
                        fp_json_double(j, pct, 1);
                fp_json_end_object(j);
        }
        fp_json_end_array(j);
}

/* A run of counts, each a key and its number. */
struct uint_field {
        const char *key;
        uint64_t v;
};

static void uint_fields(struct fp_json *j, const struct uint_field *f, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                fp_json_key(j, f[i].key);
                fp_json_uint(j, f[i].v);
        }
}

#define UINT_FIELDS(j, a) uint_fields((j), (a), sizeof(a) / sizeof((a)[0]))

/* A JVM's names (jvmnames.h), an object left open for more keys. */
static void jvm_json(struct fp_json *j, const struct fp_jvm_names_status *st)
{
        const struct uint_field jf[] = {
            {"requests", st->requests}, {"answered", st->answered}, {"failed", st->failed}};

        fp_json_begin_object(j);
        fp_json_key(j, "names");
        fp_json_string(j, st->state <= 0   ? "refused"
                          : st->code_cache ? "code cache (read from its memory)"
                                           : "perf map (Compiler.perfmap, asked)");
        /* Compiled code read from its code cache (hotspot.h): why not, and what was read. */
        fp_json_key(j, "code_cache_why");
        fp_json_string(j, st->code_why);
        const struct uint_field cf[] = {{"code_lookups", st->code.lookups},
                                        {"code_blobs_read", st->code.blobs_read},
                                        {"code_not_found", st->code.not_found},
                                        {"code_inlined", st->code.inlined},
                                        {"code_scopes_failed", st->code.scopes_failed},
                                        {"code_frames_unknown", st->code.frames_unknown}};
        UINT_FIELDS(j, cf);
        UINT_FIELDS(j, jf);
        fp_json_key(j, "pending");
        fp_json_bool(j, st->pending);
        fp_json_key(j, "why");
        fp_json_string(j, st->why);
        /* -XX:+PreserveFramePointer: true, false, or null (not known). */
        fp_json_key(j, "frame_pointers");
        if (st->frame_pointers >= 0)
                fp_json_bool(j, st->frame_pointers > 0);
        else
                fp_json_null(j);
        /* Interpreted methods named from the JVM's memory (hotspot.h). */
        const struct uint_field mf[] = {{"interpreted_named", st->methods_named},
                                        {"interpreted_failed", st->methods_failed}};
        UINT_FIELDS(j, mf);
        fp_json_key(j, "interpreted_why");
        fp_json_string(j, st->interpreted_why);
}

/* A JVM's "java of PID" line; tier: " (host tier)" or "". */
static void jvm_text(FILE *out, pid_t pid, const char *tier, const struct fp_jvm_names_status *jv)
{
        if (jv->state < 0)
                fprintf(out, "java of %d%s: not asked: %s\n", (int)pid, tier, jv->why);
        else if (jv->state > 0 && jv->code_cache)
                fprintf(out,
                        "java of %d%s: HotSpot, compiled methods named and unwound from its code "
                        "cache, with what they inlined (%" PRIu64 " blobs read, %" PRIu64
                        " lookups with inlined methods, %" PRIu64
                        " compiled frames whose caller is not known); interpreted methods "
                        "%" PRIu64 " named from its memory\n",
                        (int)pid, tier, jv->code.blobs_read, jv->code.inlined,
                        jv->code.frames_unknown, jv->methods_named);
        else if (jv->state > 0)
                fprintf(out,
                        "java of %d%s: HotSpot, compiled methods named from the perf map it writes "
                        "when asked (Compiler.perfmap): %" PRIu64 " requests, %" PRIu64
                        " answered, %" PRIu64 " failed%s%s; interpreted methods %" PRIu64
                        " named from its memory%s%s%s%s%s\n",
                        (int)pid, tier, jv->requests, jv->answered, jv->failed,
                        jv->why[0] ? "; last: " : "", jv->why, jv->methods_named,
                        jv->interpreted_why[0] ? ", not read: " : "", jv->interpreted_why,
                        jv->frame_pointers == 0
                            ? "; without -XX:+PreserveFramePointer, stacks end at their first "
                              "compiled method (jit_no_frame_pointer)"
                            : "",
                        jv->code_why[0] ? "; code cache not read: " : "", jv->code_why);
}

/* "off_cpu": a target's or the host tier's off-CPU figures, null when it has none (period 0). */
static void offcpu_json(struct fp_json *j, uint64_t period, const struct fp_target_stats *st)
{
        fp_json_key(j, "off_cpu");
        if (!period) {
                fp_json_null(j);
                return;
        }
        fp_json_begin_object(j);
        const struct uint_field oc[] = {
            {"period_ns", period},
            {"parts", st->off_parts},
            {"kept", st->off_kept},
            {"records", st->off_records},
            {"samples", st->off_samples},
            {"value_ns", st->off_value},
            {"stacks", st->off_walked},
            {"stacks_to_root", st->off_unwound_root},
            {"lost_ring", st->off_lost_ring},
            {"lost_stack_unreadable", st->off_lost_copy},
            {"lost_thread_exited", st->off_lost_exited},
            {"lost_call_changed", st->off_lost_changed},
            {"lost_unpaired", st->off_unpaired},
            {"lost_ns", st->off_lost_ns},
        };
        UINT_FIELDS(j, oc);
        fp_json_end_object(j);
}

/* A process's (or the host tier's) "javascript" object: its runtime and its frames' counts. */
static void javascript_json(struct fp_json *j, const struct fp_rt_stats *r)
{
        if (!r->runtime[0] && !r->refused[0]) {
                fp_json_null(j);
                return;
        }
        fp_json_begin_object(j);
        if (r->refused[0]) {
                fp_json_key(j, "refused");
                fp_json_string(j, r->refused);
        } else {
                fp_json_key(j, "runtime");
                fp_json_string(j, r->runtime);
        }
        const struct {
                const char *key;
                uint64_t v;
        } f[] = {{"frames", r->frames},           {"typed_frames", r->typed},
                 {"no_function", r->no_function}, {"unreadable", r->unreadable},
                 {"functions", r->functions},     {"functions_full", r->functions_full}};
        for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
                fp_json_key(j, f[i].key);
                fp_json_uint(j, f[i].v);
        }
        fp_json_end_object(j);
}

/* The rest of a "javascript" line: its frames named, and those left native by reason. */
static void javascript_text(FILE *out, const struct fp_rt_stats *r)
{
        fprintf(out, ": %" PRIu64 " frames named, %" PRIu64 " functions read", r->frames,
                r->functions);
        if (r->no_function || r->unreadable || r->functions_full)
                fprintf(out,
                        "; left native: no function %" PRIu64 ", unreadable %" PRIu64
                        ", functions table full %" PRIu64,
                        r->no_function, r->unreadable, r->functions_full);
        fputc('\n', out);
}

/*
 * What became of Python stacks (pyframes.h), as "stacks" of a target's or
 * the host tier's "python" object: p's counts (zeros when !found), or
 * "off" when the program does not run at its samples.
 */
static void python_stacks_json(struct fp_json *j, const struct fp_pyframes_stats *p, bool on,
                               bool found, uint64_t attach_failed)
{
        const struct fp_pyframes_stats none = {0};

        fp_json_key(j, "stacks");
        if (!on) {
                fp_json_string(j, "off");
                return;
        }
        if (!found)
                p = &none;
        const struct uint_field f[] = {
            {"samples", p->samples},
            {"early", p->early},
            {"no_record", p->no_record},
            {"no_thread_state", p->no_thread_state},
            {"unreadable", p->unreadable},
            {"truncated", p->truncated},
            {"records", p->records},
            {"records_unmatched", p->records_unmatched},
            {"evals_without_frames", p->evals_without},
            {"frames_unnamed", p->frames_unnamed},
            {"codes", p->codes},
            {"codes_unnamed", p->codes_unnamed},
            {"codes_full", p->codes_full},
            {"attach_failed", found ? attach_failed : 0},
            {"offcpu_stacks", p->offcpu},
            {"offcpu_without", p->offcpu_without},
        };
        fp_json_begin_object(j);
        UINT_FIELDS(j, f);
        fp_json_end_object(j);
}

static void target_json(struct fp_json *j, const struct fp_core_target_status *ts)
{
        const struct fp_target_stats *st = &ts->st;
        const struct uint_field counts[] = {
            {"samples", st->samples},
            {"value", st->value},
            {"lost", st->lost},
            {"throttled", st->throttled},
            {"unwind_empty", st->unwind_empty},
            {"attach_failed", st->attach_failed},
            {"unresolved_frames", st->unresolved},
            {"dropped_nomem", st->dropped_nomem},
            {"revoked_exec", st->revoked},
            {"stacks_over_limit", st->stacks_over_limit},
            {"ring_bytes", st->ring_bytes},
            {"ring_wakes", st->ring_wakes},
        };

        fp_json_begin_object(j);
        fp_json_key(j, "pid");
        fp_json_int(j, ts->pid);
        fp_json_key(j, "comm");
        fp_json_string(j, ts->comm);
        fp_json_key(j, "exe");
        fp_json_string(j, ts->exe);
        fp_json_key(j, "event");
        fp_json_string(j, ts->cfg->event.name);
        fp_json_key(j, "frequency");
        fp_json_uint(j, rate_hz(ts->cfg));
        fp_json_key(j, "period");
        fp_json_uint(j, ts->cfg->period);
        fp_json_key(j, "state");
        fp_json_string(j, state_name(st->state));
        fp_json_key(j, "threads");
        fp_json_uint(j, st->threads_live);
        fp_json_key(j, "threads_seen");
        fp_json_uint(j, st->threads_seen);
        fp_json_key(j, "threads_over_limit");
        fp_json_uint(j, st->threads_over_limit);
        UINT_FIELDS(j, counts);
        fp_json_key(j, "kernel_excluded");
        fp_json_bool(j, st->kernel_excluded);
        fp_json_key(j, "drops");
        fp_json_begin_object(j);
        for (size_t i = 0; i < ts->n_drops; i++) {
                fp_json_key(j, ts->drops[i].reason);
                fp_json_uint(j, ts->drops[i].count);
        }
        fp_json_end_object(j);
        fp_json_key(j, "rule");
        fp_json_int(j, ts->rule_id);
        fp_json_key(j, "service");
        fp_json_string(j, ts->service);
        fp_json_key(j, "follow_children");
        fp_json_bool(j, ts->follows_children);
        fp_json_key(j, "parent_pid");
        fp_json_int(j, ts->parent);
        /* A JVM: how its compiled methods are named, or why it is not asked; null: none. */
        fp_json_key(j, "java");
        if (ts->jvm.state) {
                jvm_json(j, &ts->jvm);
                fp_json_end_object(j);
        } else {
                fp_json_null(j);
        }
        /*
         * The interpreters it runs whose stacks are read at sample time
         * ("python", "php", "ruby"): each one's version, or why it was
         * refused; null: none.
         */
        for (int k = 0; k < FP_PYSTACK_KINDS; k++) {
                const struct fp_core_interp *in = &ts->interp[k];
                fp_json_key(j, fp_pyframes_kinds[k].key);
                if (in->found > 0) {
                        fp_json_begin_object(j);
                        fp_json_key(j, "version");
                        fp_json_string(j, in->version);
                        python_stacks_json(j, &in->st, in->stacks_on, in->stacks_found,
                                           ts->python_attach_failed);
                        fp_json_end_object(j);
                } else if (in->found < 0) {
                        fp_json_begin_object(j);
                        fp_json_key(j, "refused");
                        fp_json_string(j, in->why);
                        fp_json_end_object(j);
                } else {
                        fp_json_null(j);
                }
        }
        /* Its JavaScript frames (a V8 recognised in it, or why not); null: none. */
        fp_json_key(j, "javascript");
        javascript_json(j, &ts->javascript);
        fp_json_key(j, "threads_missed");
        fp_json_uint(j, st->threads_missed);
        fp_json_key(j, "threads_by_rescan");
        fp_json_uint(j, st->threads_by_rescan);
        fp_json_key(j, "exit_tails");
        fp_json_uint(j, st->exit_tails);
        /* Threads born while sampled, exited: their CPU by the kernel beside the profile's. */
        const struct uint_field born[] = {
            {"exited", st->born_exited},
            {"cpu_ns", st->born_cpu_ns},
            {"profiled", st->born_profiled},
            {"before_sampling_ns", st->born_before_ns},
            {"bridged", st->bridged},
            {"bridge_twins", st->bridge_twins},
            {"left_out", st->bridge_left_out},
            {"left_out_ns", st->bridge_left_out_ns},
            {"start_counted", st->start_counted},
            {"start_events", st->start_events},
        };
        fp_json_key(j, "born");
        fp_json_begin_object(j);
        UINT_FIELDS(j, born);
        fp_json_end_object(j);
        fp_json_key(j, "first_period");
        fp_json_begin_object(j);
        fp_json_key(j, "mode");
        fp_json_string(j, ts->cfg->freq                ? "frequency"
                          : ts->cfg->first_period_full ? "full"
                                                       : "random");
        const struct uint_field first[] = {
            {"first_samples", st->first_samples},
            {"extra", st->first_extra},
            {"shift", st->first_shift},
            {"pending", st->first_pending},
        };
        UINT_FIELDS(j, first);
        fp_json_end_object(j);
        fp_json_key(j, "attach_latency_us");
        fp_json_begin_object(j);
        fp_json_key(j, "count");
        fp_json_uint(j, ts->latency.count);
        fp_json_key(j, "p50");
        fp_json_uint(j, ts->latency.p50_us);
        fp_json_key(j, "p90");
        fp_json_uint(j, ts->latency.p90_us);
        fp_json_key(j, "p99");
        fp_json_uint(j, ts->latency.p99_us);
        fp_json_key(j, "max");
        fp_json_uint(j, ts->latency.max_us);
        fp_json_end_object(j);
        counters_json(j, ts);
        fp_json_key(j, "unwind");
        fp_json_begin_object(j);
        fp_json_key(j, "mode");
        fp_json_string(j, fp_unwind_mode_name(ts->cfg->unwind));
        const struct uint_field uw[] = {
            {"frames_cfi", st->frames_cfi},
            {"frames_fp", st->frames_fp},
            {"frames_java", st->frames_java},
            {"samples_to_root", st->unwound_root},
            {"unwind_failed", st->unwind_failed},
            {"stack_copy_short", st->stack_copy_short},
            {"jit_no_frame_pointer", st->jit_no_fp},
            {"leaf_fixups", st->leaf_fixups},
            {"jit_frames", st->jit_frames},
            {"stack_bytes_per_sample", st->samples ? st->stack_bytes / st->samples : 0},
            {"stack_copy_bytes", ts->cfg->stack_bytes},
            {"stack_resizes", st->stack_resizes},
            {"stack_resize_failed", st->stack_resize_failed},
        };
        UINT_FIELDS(j, uw);
        fp_json_end_object(j);
        offcpu_json(j, ts->cfg->off_cpu_period, st);
        fp_json_end_object(j);
}

/*
 * The rest of a "python" (or "php", "ruby") line: how many samples have
 * their stack of interpreter kind k (fp_pyframes_kinds[]), and why not.
 */
static void python_stacks_text(FILE *out, const struct fp_pyframes_stats *p, bool on, int k)
{
        const char *lang = fp_pyframes_kinds[k].lang, *codes = fp_pyframes_kinds[k].codes;

        if (!on) {
                fprintf(out, ", %s stacks not read\n", lang);
                return;
        }
        fprintf(out, ", %" PRIu64 " samples with a %s stack", p->samples, lang);
        if (p->early || p->no_record || p->no_thread_state || p->unreadable || p->truncated)
                fprintf(out,
                        "; without or cut: %" PRIu64 " before it was read, %" PRIu64
                        " no record, %" PRIu64 " not in %s code, %" PRIu64 " unreadable, %" PRIu64
                        " too deep",
                        p->early, p->no_record, p->no_thread_state, lang, p->unreadable,
                        p->truncated);
        if (p->offcpu || p->offcpu_without)
                fprintf(out, "; %" PRIu64 " off-CPU stacks with one, %" PRIu64 " without",
                        p->offcpu, p->offcpu_without);
        fprintf(out, "; %" PRIu64 " %s named", p->codes - p->codes_unnamed, codes);
        if (p->codes_unnamed)
                fprintf(out, ", %" PRIu64 " unreadable", p->codes_unnamed);
        fprintf(out, "\n");
}

static void rule_json(struct fp_json *j, const struct fp_core_rule_status *rs)
{
        const struct fp_rule *r = rs->rule;
        char events[FP_PERF_EVENT_LIST_MAX];

        fp_perf_event_list_string(&r->cfg, events, sizeof(events));
        fp_json_begin_object(j);
        fp_json_key(j, "id");
        fp_json_int(j, rs->id);
        fp_json_key(j, "selector");
        fp_json_string(j, fp_rule_kind_name(r->kind));
        fp_json_key(j, "match");
        fp_json_string(j, r->match);
        fp_json_key(j, "service");
        fp_json_string(j, r->service);
        fp_json_key(j, "owner");
        fp_json_uint(j, rs->owner);
        fp_json_key(j, "origin");
        fp_json_string(j, rs->from_config ? "config" : "agentctl");
        fp_json_key(j, "events");
        fp_json_string(j, events);
        fp_json_key(j, "frequency");
        fp_json_uint(j, rate_hz(&r->cfg));
        fp_json_key(j, "follow_children");
        fp_json_bool(j, r->follow);
        fp_json_key(j, "max_processes");
        fp_json_uint(j, r->max_processes);
        fp_json_key(j, "running");
        fp_json_uint(j, rs->running);
        fp_json_key(j, "started");
        fp_json_uint(j, rs->started);
        fp_json_key(j, "gone");
        fp_json_uint(j, rs->started - rs->running);
        fp_json_key(j, "refused");
        fp_json_uint(j, rs->refused);
        fp_json_key(j, "failed");
        fp_json_uint(j, rs->failed);
        fp_json_key(j, "last_error");
        fp_json_string(j, rs->last_error);
        fp_json_key(j, "start_latency_us");
        fp_json_begin_object(j);
        fp_json_key(j, "count");
        fp_json_uint(j, rs->n_latency);
        fp_json_key(j, "p50");
        fp_json_uint(j, rs->p50_us);
        fp_json_key(j, "p99");
        fp_json_uint(j, rs->p99_us);
        fp_json_key(j, "max");
        fp_json_uint(j, rs->max_us);
        fp_json_end_object(j);
        fp_json_end_object(j);
}

void fp_status_write_json(const struct fp_core_status *st, FILE *out)
{
        struct fp_json j;

        fp_json_init(&j, fp_write_file, out);
        fp_json_begin_object(&j);
        fp_json_key(&j, "agent_pid");
        fp_json_int(&j, st->agent_pid);
        fp_json_key(&j, "version");
        fp_json_string(&j, st->version);
        fp_json_key(&j, "uptime_seconds");
        fp_json_uint(&j, st->uptime_s);
        fp_json_key(&j, "symbol_files_loaded");
        fp_json_uint(&j, st->symbol_files_loaded);
        fp_json_key(&j, "symbol_sources");
        fp_json_begin_object(&j);
        for (int i = 0; i < FP_SYM_SOURCES; i++) {
                fp_json_key(&j, fp_sym_source_name((enum fp_sym_source)i));
                fp_json_uint(&j, st->symbol_sources[i]);
        }
        fp_json_end_object(&j);
        fp_json_key(&j, "frames_named");
        fp_json_begin_object(&j);
        for (int i = 0; i < FP_EXPORT_NAME_KINDS; i++) {
                fp_json_key(&j, fp_export_name_kind(i));
                fp_json_uint(&j, st->frames_named[i]);
        }
        fp_json_end_object(&j);
        fp_json_key(&j, "symbol_files_loading");
        fp_json_uint(&j, st->symbol_files_loading);
        fp_json_key(&j, "python_files");
        fp_json_uint(&j, st->python_files);
        fp_json_key(&j, "python_files_refused");
        fp_json_uint(&j, st->python_refused);
        fp_json_key(&j, "python_stacks");
        fp_json_string(&j, st->python_stacks);
        fp_json_key(&j, "bucket_seconds");
        fp_json_uint(&j, st->bucket_seconds);

        fp_json_key(&j, "store");
        fp_json_begin_object(&j);
        fp_json_key(&j, "path");
        fp_json_string(&j, st->store_path ? st->store_path : "");
        fp_json_key(&j, "ok");
        fp_json_bool(&j, st->store_ok);
        fp_json_key(&j, "error");
        fp_json_string(&j, st->store_error);
        const struct uint_field store[] = {
            {"max_bytes", st->store_max_bytes},
            {"file_bytes", st->file_bytes},
            {"wal_bytes", st->wal_bytes},
            {"buckets", st->buckets},
            {"pending_upload", st->pending_buckets},
            {"buckets_written", st->buckets_written},
            {"buckets_failed", st->buckets_failed},
            {"queued", st->queued},
        };
        UINT_FIELDS(&j, store);
        fp_json_end_object(&j);

        if (st->upload_url) {
                const struct fp_upload_status *u = &st->upload;
                fp_json_key(&j, "upload");
                fp_json_begin_object(&j);
                fp_json_key(&j, "url");
                fp_json_string(&j, st->upload_url);
                fp_json_key(&j, "in_progress");
                fp_json_bool(&j, u->in_progress);
                fp_json_key(&j, "last_success_ns");
                fp_json_int(&j, u->last_success_ns);
                fp_json_key(&j, "last_attempt_ns");
                fp_json_int(&j, u->last_attempt_ns);
                fp_json_key(&j, "next_attempt_ns");
                fp_json_int(&j, u->next_attempt_ns);
                fp_json_key(&j, "oldest_waiting_ns");
                fp_json_int(&j, st->oldest_waiting_ns);
                fp_json_key(&j, "config_error");
                fp_json_bool(&j, u->config_error);
                const struct uint_field up[] = {
                    {"rounds_ok", u->rounds_ok},
                    {"rounds_failed", u->rounds_failed},
                    {"uploads_ok", u->uploads_ok},
                    {"uploads_rejected", u->uploads_rejected},
                    {"bytes_sent", u->bytes_sent},
                    {"buckets_built", u->buckets_built},
                    {"collectors", st->upload_urls},
                    {"failovers", u->failovers},
                    {"pending_buckets", st->pending_buckets},
                    {"waiting_uploads", st->waiting_uploads},
                    {"waiting_bytes", st->waiting_bytes},
                };
                UINT_FIELDS(&j, up);
                fp_json_key(&j, "last_error");
                fp_json_string(&j, u->last_error);
                fp_json_end_object(&j);
        }

        fp_json_key(&j, "thread_tracker");
        fp_json_begin_object(&j);
        fp_json_key(&j, "name");
        fp_json_string(&j, st->tracker);
        fp_json_key(&j, "reason");
        fp_json_string(&j, st->tracker_reason);
        fp_json_key(&j, "events_dropped");
        fp_json_uint(&j, st->tracker_events_dropped);
        fp_json_key(&j, "children_not_followed");
        fp_json_uint(&j, st->children_not_followed);
        fp_json_end_object(&j);

        fp_json_key(&j, "bridge");
        fp_json_begin_object(&j);
        const struct uint_field bridge[] = {
            {"period_ns", st->bridge_period},      {"cpus", st->bridge_cpus},
            {"samples", st->bridge_samples},       {"lost", st->bridge_lost},
            {"unclaimed", st->bridge_unclaimed},   {"full", st->bridge_full},
            {"exit_tails", st->bridge_exit_tails},
        };
        UINT_FIELDS(&j, bridge);
        fp_json_key(&j, "error");
        fp_json_string(&j, st->bridge_error);
        fp_json_end_object(&j);

        fp_json_key(&j, "off_cpu");
        fp_json_begin_object(&j);
        const struct uint_field off[] = {
            {"targets", st->offcpu_targets},
            {"records", st->offcpu_records},
            {"unclaimed", st->offcpu_unclaimed},
            {"python_records", st->offcpu_python_records},
            {"python_unpaired", st->offcpu_python_unpaired},
        };
        UINT_FIELDS(&j, off);
        fp_json_end_object(&j);

        fp_json_key(&j, "host_tier");
        if (!st->host_on) {
                fp_json_null(&j);
        } else {
                const struct fp_host_stats *h = &st->host;
                fp_json_begin_object(&j);
                const struct uint_field hs[] = {
                    {"freq", st->host_cfg.freq},
                    {"cpus", h->cpus},
                    {"samples", h->st.samples},
                    {"idle", h->idle},
                    {"covered_by_target", h->covered},
                    {"process_unknown", h->unknown},
                    {"process_table_full", h->table_full},
                    {"lost", h->st.lost},
                    {"throttled", h->st.throttled},
                    {"sideband_lost", h->sideband_lost},
                    {"processes", h->procs},
                    {"processes_from_ring", h->procs_from_ring},
                    {"processes_from_proc", h->procs_from_proc},
                    {"processes_forgotten", h->procs_forgotten},
                    {"cgroups", h->cgroups},
                    {"unwound_root", h->st.unwound_root},
                    {"unwind_failed", h->st.unwind_failed},
                    {"stack_copy_short", h->st.stack_copy_short},
                    {"jit_no_frame_pointer", h->st.jit_no_fp},
                    {"jit_frames", h->st.jit_frames},
                    {"jit_maps_refused", h->jit_maps_refused},
                };
                UINT_FIELDS(&j, hs);
                fp_json_key(&j, "kernel");
                fp_json_bool(&j, st->host_cfg.kernel_frames);
                for (int k = 0; k < FP_PYSTACK_KINDS; k++) {
                        fp_json_key(&j, fp_pyframes_kinds[k].key);
                        fp_json_begin_object(&j);
                        fp_json_key(&j, "processes");
                        fp_json_uint(&j, h->interp_procs[k]);
                        if (k == FP_PYSTACK_PYTHON) { /* (the records of all kinds) */
                                fp_json_key(&j, "records_unclaimed");
                                fp_json_uint(&j, h->python_records_unclaimed);
                        }
                        python_stacks_json(&j, &h->interp[k], h->python_on, true,
                                           h->python_attach_failed);
                        fp_json_end_object(&j);
                }
                fp_json_key(&j, "javascript_processes");
                fp_json_uint(&j, h->javascript_procs);
                fp_json_key(&j, "javascript");
                javascript_json(&j, &h->javascript);
                /* Its JVMs (the first FP_HOST_STATUS_JVMS), as a target's "java". */
                fp_json_key(&j, "jvms");
                fp_json_uint(&j, h->jvms);
                fp_json_key(&j, "java");
                fp_json_begin_array(&j);
                for (unsigned i = 0; i < h->n_jvm; i++) {
                        jvm_json(&j, &h->jvm[i].st);
                        fp_json_key(&j, "pid");
                        fp_json_int(&j, h->jvm[i].pid);
                        fp_json_key(&j, "comm");
                        fp_json_string(&j, h->jvm[i].comm);
                        fp_json_end_object(&j);
                }
                fp_json_end_array(&j);
                offcpu_json(&j, st->host_cfg.off_cpu_period, &h->st);
                if (st->host_cfg.off_cpu_period) {
                        const struct uint_field ho[] = {
                            {"off_cpu_covered_by_target", h->off_covered},
                            {"off_cpu_process_unknown", h->off_unknown},
                        };
                        UINT_FIELDS(&j, ho);
                }
                fp_json_key(&j, "drops");
                fp_json_begin_object(&j);
                for (size_t i = 0; i < st->n_host_drops; i++) {
                        fp_json_key(&j, st->host_drops[i].reason);
                        fp_json_uint(&j, st->host_drops[i].count);
                }
                fp_json_end_object(&j);
                fp_json_end_object(&j);
        }

        fp_json_key(&j, "targets");
        fp_json_begin_array(&j);
        for (size_t i = 0; i < st->n_targets; i++)
                target_json(&j, &st->targets[i]);
        fp_json_end_array(&j);
        fp_json_key(&j, "rules");
        fp_json_begin_array(&j);
        for (size_t i = 0; i < st->n_rules; i++)
                rule_json(&j, &st->rules[i]);
        fp_json_end_array(&j);
        fp_json_key(&j, "rule_scans");
        fp_json_uint(&j, st->rule_scans);
        fp_json_key(&j, "rule_scan_us");
        fp_json_uint(&j, st->rule_scan_us);
        fp_json_end_object(&j);
        fputc('\n', out);
}

/* Shorthand: s escaped for the terminal into a buffer of the caller's. */
#define TERM(s, buf) fp_terminal_str((s), (buf), sizeof(buf))

/* "names: 12345 frames exported: symtab 80.1%, ..., unnamed 2.0%", the kinds that named any. */
static void names_line(const struct fp_core_status *st, FILE *out)
{
        uint64_t total = 0;
        bool first = true;

        for (int i = 0; i < FP_EXPORT_NAME_KINDS; i++)
                total += st->frames_named[i];
        if (!total)
                return;
        fprintf(out, "names: %" PRIu64 " frames exported:", total);
        for (int i = 0; i < FP_EXPORT_NAME_KINDS; i++) {
                if (!st->frames_named[i])
                        continue;
                fprintf(out, "%s %s %.1f%%", first ? "" : ",", fp_export_name_kind(i),
                        100.0 * (double)st->frames_named[i] / (double)total);
                first = false;
        }
        fputc('\n', out);
}

void fp_status_write_text(const struct fp_core_status *st, FILE *out)
{
        char e1[1024], e2[1024];

        fprintf(out, "fleetprof-agent %s, pid %d, up %" PRIu64 "s, %zu target%s\n", st->version,
                (int)st->agent_pid, st->uptime_s, st->n_targets, st->n_targets == 1 ? "" : "s");
        if (st->symbol_files_loading)
                fprintf(out, "symbols: %zu file%s being read (their frames unnamed until read)\n",
                        st->symbol_files_loading, st->symbol_files_loading == 1 ? "" : "s");
        names_line(st, out);
        if (!st->store_path) {
                fprintf(out, "store: none (samples are kept in memory only)\n");
        } else {
                char used[32], max[32];
                bool ok = st->store_ok && !st->store_write_failing;
                human_bytes(used, sizeof(used), st->file_bytes + st->wal_bytes);
                human_bytes(max, sizeof(max), st->store_max_bytes);
                fprintf(out,
                        "store: %s, %s of %s, %" PRIu64 " buckets of %us, %" PRIu64
                        " not uploaded%s%s\n",
                        TERM(st->store_path, e1), used, max, st->buckets, st->bucket_seconds,
                        st->pending_buckets,
                        ok ? "" : ", FAILING: ", ok ? "" : TERM(st->store_error, e2));
        }
        if (st->upload_url) {
                const struct fp_upload_status *u = &st->upload;
                char last[32], oldest[32], bytes[32];
                format_age(last, sizeof(last), u->last_success_ns);
                format_age(oldest, sizeof(oldest), st->oldest_waiting_ns);
                human_bytes(bytes, sizeof(bytes), st->waiting_bytes);
                char which[96] = "";
                if (st->upload_urls > 1)
                        snprintf(which, sizeof(which),
                                 " (one of %" PRIu64 " collectors, %" PRIu64 " failovers)",
                                 st->upload_urls, u->failovers);
                fprintf(out,
                        "upload: %s%s, last success %s, %" PRIu64 " uploads delivered, %" PRIu64
                        " refused%s\n",
                        TERM(st->upload_url, e1), which, last, u->uploads_ok, u->uploads_rejected,
                        u->in_progress ? ", uploading now" : "");
                if (st->waiting_uploads)
                        fprintf(out,
                                "  waiting: %" PRIu64 " buckets (%" PRIu64
                                " uploads of %s built), the oldest from %s\n",
                                st->pending_buckets, st->waiting_uploads, bytes, oldest);
                else if (st->pending_buckets)
                        fprintf(out, "  waiting: %" PRIu64 " buckets, the oldest from %s\n",
                                st->pending_buckets, oldest);
                if (u->last_error[0])
                        fprintf(out, "  last error: %s\n", TERM(u->last_error, e2));
        } else {
                fprintf(out, "upload: none (no --collector)\n");
        }
        if (strcmp(st->tracker, "bpf") == 0)
                fprintf(out, "thread tracker: bpf (scheduler tracepoints)\n");
        else
                fprintf(out, "thread tracker: perf-fork (fallback: %s)\n",
                        TERM(st->tracker_reason, e1));
        fprintf(out, "python stacks: %s\n", TERM(st->python_stacks, e1));
        if (st->bridge_period) {
                fprintf(out,
                        "bridge: new threads sampled from birth at %" PRIu64
                        " Hz per CPU on %u CPUs, %" PRIu64 " samples",
                        1000000000 / st->bridge_period, st->bridge_cpus, st->bridge_samples);
                if (st->bridge_exit_tails)
                        fprintf(out, ", %" PRIu64 " in threads' exits", st->bridge_exit_tails);
                if (st->bridge_lost)
                        fprintf(out, ", %" PRIu64 " lost", st->bridge_lost);
                if (st->bridge_unclaimed)
                        fprintf(out, ", %" PRIu64 " of processes no target took",
                                st->bridge_unclaimed);
                if (st->bridge_full)
                        fprintf(out, ", %" PRIu64 " births not taken (its map was full)",
                                st->bridge_full);
                fputc('\n', out);
        } else if (st->bridge_error[0])
                fprintf(out, "bridge: %s\n", TERM(st->bridge_error, e1));
        bool host_off = st->host_on && st->host_cfg.off_cpu_period;
        if (st->offcpu_targets || host_off) {
                fprintf(out, "off-CPU: bpf, %u process%s%s, %" PRIu64 " records",
                        st->offcpu_targets, st->offcpu_targets == 1 ? "" : "es",
                        host_off ? " and the host tier" : "", st->offcpu_records);
                if (st->offcpu_unclaimed)
                        fprintf(out, ", %" PRIu64 " of processes no longer profiled",
                                st->offcpu_unclaimed);
                if (st->offcpu_python_records)
                        fprintf(out,
                                "; %" PRIu64 " Python stacks read with them, %" PRIu64
                                " without their stack's record (lost)",
                                st->offcpu_python_records, st->offcpu_python_unpaired);
                fputc('\n', out);
        }
        if (st->host_on) {
                const struct fp_host_stats *h = &st->host;
                uint64_t all = h->st.samples + h->idle + h->covered + h->unknown + h->table_full;
                fprintf(out,
                        "host tier: cpu-clock at %" PRIu64 " Hz on %u CPUs%s: %" PRIu64
                        " samples of %u processes (%" PRIu64 " learnt from the ring, %" PRIu64
                        " from /proc), idle %.1f%%",
                        st->host_cfg.freq, h->cpus, st->host_cfg.kernel_frames ? " (kernel)" : "",
                        h->st.samples, h->procs, h->procs_from_ring, h->procs_from_proc,
                        all ? 100.0 * (double)h->idle / (double)all : 0.0);
                if (h->covered)
                        fprintf(out, ", %" PRIu64 " counted by targets (covered_by_target)",
                                h->covered);
                for (size_t i = 0; i < st->n_host_drops; i++)
                        fprintf(out, "%s%s %" PRIu64,
                                i ? ", " : "; not kept: ", st->host_drops[i].reason,
                                st->host_drops[i].count);
                fputc('\n', out);
                for (unsigned i = 0; i < h->n_jvm; i++)
                        jvm_text(out, h->jvm[i].pid, " (host tier)", &h->jvm[i].st);
                for (int k = 0; k < FP_PYSTACK_KINDS; k++) {
                        const struct fp_pyframes_kind *pk = &fp_pyframes_kinds[k];
                        if (!h->interp_procs[k] && !h->interp[k].samples)
                                continue;
                        fprintf(out, "host tier %s: %u processes running %s now", pk->key,
                                h->interp_procs[k], pk->runtime);
                        python_stacks_text(out, &h->interp[k], h->python_on, k);
                }
                if (h->javascript_procs) {
                        fprintf(out, "host tier javascript: %u processes running V8 now",
                                h->javascript_procs);
                        javascript_text(out, &h->javascript);
                }
                if (host_off)
                        fprintf(out,
                                "host tier off-CPU: %.3f s in %" PRIu64
                                " samples (block parts kept: %" PRIu64 " of %" PRIu64
                                ", T %.3f ms), %" PRIu64 " of %" PRIu64 " stacks to the root\n",
                                h->st.off_value / 1e9, h->st.off_samples, h->st.off_kept,
                                h->st.off_parts, st->host_cfg.off_cpu_period / 1e6,
                                h->st.off_unwound_root, h->st.off_walked);
        }
        for (size_t i = 0; i < st->n_rules; i++) {
                const struct fp_core_rule_status *rs = &st->rules[i];
                char desc[FP_RULE_MATCH_MAX + 32];
                fp_rule_describe(rs->rule, desc, sizeof(desc));
                fprintf(out,
                        "rule %lld: %s service %s, %s%s: %u running, %" PRIu64 " started, %" PRIu64
                        " gone",
                        (long long)rs->id, TERM(desc, e1),
                        rs->rule->service[0] ? rs->rule->service : "(executable's name)",
                        rs->rule->cfg.event.name, rs->from_config ? ", from the config file" : "",
                        rs->running, rs->started, rs->started - rs->running);
                if (rs->refused)
                        fprintf(out, ", %" PRIu64 " refused (--max-processes %u)", rs->refused,
                                rs->rule->max_processes);
                if (rs->failed)
                        fprintf(out, ", %" PRIu64 " failed (last: %s)", rs->failed,
                                TERM(rs->last_error, e2));
                if (rs->n_latency)
                        fprintf(out, "; exec to sampling p50 %" PRIu32 " us, p99 %" PRIu32 " us",
                                rs->p50_us, rs->p99_us);
                fputc('\n', out);
        }
        if (!st->n_targets)
                return;
        fprintf(out, "%-8s %-16s %-12s %8s %-8s %8s %10s %8s %9s %s\n", "PID", "COMM", "EVENT",
                "RATE", "STATE", "THREADS", "SAMPLES", "LOST", "THROTTLED", "SERVICE");
        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                char rate[32];
                if (rate_hz(ts->cfg))
                        snprintf(rate, sizeof(rate), "%" PRIu64 "Hz", rate_hz(ts->cfg));
                else
                        snprintf(rate, sizeof(rate), "1/%" PRIu64, ts->cfg->period);
                char service[FP_TARGET_SERVICE_MAX + 32] = "-";
                if (ts->rule_id)
                        snprintf(service, sizeof(service), "%s (rule %lld)", ts->service,
                                 (long long)ts->rule_id);
                fprintf(out,
                        "%-8d %-16s %-12s %8s %-8s %8u %10" PRIu64 " %8" PRIu64 " %9" PRIu64
                        " %s\n",
                        (int)ts->pid, TERM(ts->comm, e1), ts->cfg->event.name, rate,
                        state_name(ts->st.state), ts->st.threads_live, ts->st.samples, ts->st.lost,
                        ts->st.throttled, service);
        }
        /* The group's counters, and what the machine could not give. */
        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                const struct fp_perf_config *cfg = ts->cfg;
                double pct = running_percent(&ts->st);
                if (fp_perf_event_is_hardware(&cfg->event))
                        fprintf(out, "%d: %s samples with precise_ip %u\n", (int)ts->pid,
                                cfg->event.name, cfg->precise_ip);
                for (unsigned k = 0; k < cfg->n_members; k++) {
                        if (k == 0)
                                fprintf(out, "counters of %d:", (int)ts->pid);
                        if (pct < 0)
                                fprintf(out, "%s %s %" PRIu64 " (ran: no samples yet)",
                                        k ? "," : "", cfg->members[k].name,
                                        ts->st.counter_total[k]);
                        else
                                fprintf(out, "%s %s %" PRIu64 " (ran %.1f%%)", k ? "," : "",
                                        cfg->members[k].name, ts->st.counter_total[k], pct);
                        if (k + 1 == cfg->n_members)
                                fputc('\n', out);
                }
                if (ts->left_out[0])
                        fprintf(out, "%d: left out (not supported on this machine): %s\n",
                                (int)ts->pid, ts->left_out);
                if (ts->st.threads_over_limit)
                        fprintf(out, "%d: %" PRIu64 " threads not sampled: --max-threads %u were\n",
                                (int)ts->pid, ts->st.threads_over_limit, cfg->max_threads);
                /* The clocks' value is ns: what the profile holds of born threads, beside their
                 * CPU. */
                if (ts->st.born_exited && fp_perf_event_is_clock(&cfg->event))
                        fprintf(out,
                                "%d: %" PRIu64 " threads born and exited, CPU %.1f ms (at least "
                                "%.1f ms before their sampling began), in the profile %.1f ms "
                                "(%.2f)\n",
                                (int)ts->pid, ts->st.born_exited, ts->st.born_cpu_ns / 1e6,
                                ts->st.born_before_ns / 1e6, ts->st.born_profiled / 1e6,
                                ts->st.born_cpu_ns
                                    ? (double)ts->st.born_profiled / (double)ts->st.born_cpu_ns
                                    : 0.0);
                /*
                 * A counter's profile holds counts: a new thread's events before its
                 * counter opened come from the kernel's account where it keeps one, the
                 * bridge's CPU time is left out; both said.
                 */
                if (ts->st.bridge_left_out || ts->st.start_counted)
                        fprintf(
                            out,
                            "%d: new threads counted by their own %s once their events open "
                            "(0.1-0.2 ms after birth); %" PRIu64 " events their samples do not hold"
                            " (before that, or at their start before their first sample) in "
                            "%" PRIu64
                            " additions from the kernel's account, under [thread start]; %" PRIu64
                            " bridge ticks (%.1f ms of CPU) left out of a count\n",
                            (int)ts->pid, cfg->event.name, ts->st.start_events,
                            ts->st.start_counted, ts->st.bridge_left_out,
                            ts->st.bridge_left_out_ns / 1e6);
        }
        /* How the stacks were unwound. */
        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                const struct fp_target_stats *s = &ts->st;
                fprintf(out, "unwinding of %d: %s", (int)ts->pid,
                        fp_unwind_mode_name(ts->cfg->unwind));
                if (ts->cfg->unwind == FP_UNWIND_FP)
                        fprintf(out, ", %" PRIu64 " leaf callers fixed up", s->leaf_fixups);
                else
                        fprintf(out,
                                ", %" PRIu64 " of %" PRIu64
                                " samples to the root, frames by CFI %" PRIu64
                                ", by frame pointer %" PRIu64 ", %" PRIu64
                                " bytes of stack per sample (copies of %" PRIu32 ", fitted %" PRIu64
                                " times)",
                                s->unwound_root, s->samples, s->frames_cfi, s->frames_fp,
                                s->samples ? s->stack_bytes / s->samples : 0, ts->cfg->stack_bytes,
                                s->stack_resizes);
                fputc('\n', out);
        }
        /* Off-CPU time: how much of it, sampled how, and how many stacks reached the root. */
        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                const struct fp_target_stats *s = &ts->st;
                if (!ts->cfg->off_cpu_period)
                        continue;
                fprintf(out,
                        "off-CPU of %d: %.3f s in %" PRIu64 " samples (block parts kept: %" PRIu64
                        " of %" PRIu64 ", T %.3f ms), %" PRIu64 " of %" PRIu64
                        " stacks to the root\n",
                        (int)ts->pid, s->off_value / 1e9, s->off_samples, s->off_kept, s->off_parts,
                        ts->cfg->off_cpu_period / 1e6, s->off_unwound_root, s->off_walked);
        }
        /* The interpreters recognised in the targets (CPython, PHP, Ruby), and those refused. */
        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                for (int k = 0; k < FP_PYSTACK_KINDS; k++) {
                        const struct fp_core_interp *in = &ts->interp[k];
                        const struct fp_pyframes_kind *pk = &fp_pyframes_kinds[k];
                        if (in->found > 0) {
                                fprintf(out, "%s of %d: %s %s", pk->key, (int)ts->pid, pk->runtime,
                                        in->version);
                                python_stacks_text(out, &in->st, in->stacks_on, k);
                        } else if (in->found < 0) {
                                fprintf(out, "%s of %d: not read: %s\n", pk->key, (int)ts->pid,
                                        in->why);
                        }
                }
        }
        /* The V8s recognised in the targets (their JavaScript frames), and those refused. */
        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                if (ts->javascript.refused[0]) {
                        fprintf(out, "javascript of %d: not read: %s\n", (int)ts->pid,
                                ts->javascript.refused);
                } else if (ts->javascript.runtime[0]) {
                        fprintf(out, "javascript of %d: %s", (int)ts->pid, ts->javascript.runtime);
                        javascript_text(out, &ts->javascript);
                }
        }
        /* The JVMs, and how their compiled methods are named. */
        for (size_t i = 0; i < st->n_targets; i++)
                jvm_text(out, st->targets[i].pid, "", &st->targets[i].jvm);
        /* Every sample that could not be kept, by reason. */
        for (size_t i = 0; i < st->n_targets; i++) {
                const struct fp_core_target_status *ts = &st->targets[i];
                if (!ts->n_drops)
                        continue;
                fprintf(out, "dropped from %d:", (int)ts->pid);
                for (size_t k = 0; k < ts->n_drops; k++)
                        fprintf(out, "%s %s %" PRIu64, k ? "," : "", ts->drops[k].reason,
                                ts->drops[k].count);
                fputc('\n', out);
        }
}
