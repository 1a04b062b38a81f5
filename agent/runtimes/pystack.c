/* SPDX-License-Identifier: MIT */
/*
 * Python stacks at sample time, the loader: see pystack.h. It opens the
 * skeleton, keeps the processes' entries, attaches the program to sampling
 * events, and hands the ring's records to its caller.
 */
#include "pystack.h"
#include "rtelf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FP_HAVE_BPF

#include "bpflog.h"

#include "pystack.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <sys/ioctl.h>

struct fp_pystack {
        struct pystack_bpf *skel;
        struct ring_buffer *ring;
        fp_pystack_fn fn;
        void *userdata;
        int n;
        int mirror; /* another program's map of the same entries (fp_pystack_mirror()), or -1 */
};

/* Copies each entry of map from into map to, or (delete) takes their keys out of it. */
static void copy_entries(int from, int to, bool delete)
{
        struct fp_pystack_proc v;
        __u32 key, next;
        void *prev = NULL;

        while (bpf_map_get_next_key(from, prev, &next) == 0) {
                key = next;
                prev = &key;
                if (delete)
                        (void)bpf_map_delete_elem(to, &key);
                else if (bpf_map_lookup_elem(from, &key, &v) == 0)
                        (void)bpf_map_update_elem(to, &key, &v, BPF_ANY);
        }
}

static int on_record(void *ctx, void *data, size_t len)
{
        struct fp_pystack *s = ctx;
        const struct fp_pystack_record *r = data;

        /* Never read past what the ring holds. */
        if (len < FP_PYSTACK_HEADER_LEN || r->n_frames > FP_PYSTACK_MAX_FRAMES ||
            r->n_frames * sizeof(r->frames[0]) > len - FP_PYSTACK_HEADER_LEN)
                return 0;
        s->n++;
        s->fn(s->userdata, r);
        return 0;
}

int fp_pystack_new(fp_pystack_fn fn, void *userdata, struct fp_pystack **ret, char *err,
                   size_t err_len)
{
        struct fp_pystack *s = calloc(1, sizeof(*s));
        int r;

        if (!s) {
                snprintf(err, err_len, "out of memory");
                return -ENOMEM;
        }
        s->fn = fn;
        s->userdata = userdata;
        s->mirror = -1;
        fp_bpflog_begin();
        s->skel = pystack_bpf__open_and_load();
        if (!s->skel) {
                r = -errno;
                snprintf(err, err_len, "Python stacks: the kernel refused the BPF program: %s%s",
                         strerror(-r), fp_bpflog_suffix());
                goto fail;
        }
        s->ring = ring_buffer__new(bpf_map__fd(s->skel->maps.records), on_record, s, NULL);
        if (!s->ring) {
                r = -errno;
                snprintf(err, err_len, "cannot map the Python stacks' ring buffer: %s",
                         strerror(-r));
                goto fail;
        }
        fp_bpflog_end();
        *ret = s;
        return 0;
fail:
        fp_bpflog_end();
        fp_pystack_free(s);
        return r;
}

void fp_pystack_free(struct fp_pystack *s)
{
        if (!s)
                return;
        fp_pystack_mirror(s, -1);
        ring_buffer__free(s->ring);
        pystack_bpf__destroy(s->skel);
        free(s);
}

/* Process tgid's entry, in the program's map and its mirror. */
static int put_entry(struct fp_pystack *s, pid_t tgid, const struct fp_pystack_proc *p)
{
        __u32 key = (__u32)tgid;

        if (bpf_map_update_elem(bpf_map__fd(s->skel->maps.procs), &key, p, BPF_ANY) < 0)
                return -errno;
        if (s->mirror >= 0)
                (void)bpf_map_update_elem(s->mirror, &key, p, BPF_ANY);
        return 0;
}

int fp_pystack_add(struct fp_pystack *s, pid_t tgid, const struct fp_py_binary *b, uint64_t bias)
{
        const struct fp_py_layout *l = b->layout;
        struct fp_pystack_proc p = {
            .runtime = b->runtime + bias,
            .minor = (__u32)l->minor,
            .runtime_interp_head = l->runtime_interp_head,
            .interp_tstate_head = l->interp_tstate_head,
            .tstate_next = l->tstate_next,
            .tstate_thread_id = l->tstate_thread_id,
            .tstate_native_thread_id = l->tstate_native_thread_id,
            .tstate_frame = l->tstate_frame,
            .cframe_current_frame = l->cframe_current_frame,
            .frame_previous = l->frame_previous,
            .frame_code = l->frame_code,
            .frame_instr = l->frame_instr,
            .frame_owner = l->frame_owner,
            .frame_is_entry = l->frame_is_entry,
            .code_name = l->code_qualname >= 0 ? l->code_qualname : l->code_name,
            .code_firstlineno = l->code_firstlineno,
        };
        return put_entry(s, tgid, &p);
}

int fp_pystack_add_php(struct fp_pystack *s, pid_t tgid, const struct fp_php_binary *b,
                       uint64_t bias)
{
        const struct fp_php_layout *l = b->layout;
        struct fp_pystack_proc p = {
            .runtime = b->executor_globals + bias + (uint64_t)l->eg_current_execute_data,
            .minor = (__u32)l->minor,
            .kind = FP_PYSTACK_PHP,
            .php = {.ex_opline = l->ex_opline,
                    .ex_func = l->ex_func,
                    .ex_call_info = l->ex_call_info,
                    .ex_prev = l->ex_prev,
                    .func_type = l->func_type,
                    .func_name = l->func_name,
                    .op_array_filename = l->op_array_filename,
                    .op_array_line_start = l->op_array_line_start,
                    .op_lineno = l->op_lineno,
                    .internal_function = l->internal_function,
                    .call_top = l->call_top},
            .eval_lo = b->eval_start + bias,
            .eval_hi = b->eval_end + bias,
        };
        return put_entry(s, tgid, &p);
}

int fp_pystack_add_ruby(struct fp_pystack *s, pid_t tgid, const struct fp_ruby_binary *b,
                        uint64_t bias)
{
        const struct fp_ruby_layout *l = b->layout;
        uint64_t module = 0;
        int r;

        /* The dynamic linker's module ID for libruby's TLS: in the process, once it is loaded. */
        if ((r = fp_rt_peek(tgid, b->tls_module_slot + bias, &module, sizeof(module))) < 0)
                return r;
        if (!module)
                return -EAGAIN;
        struct fp_pystack_proc p = {
            .minor = (__u32)l->minor,
            .kind = FP_PYSTACK_RUBY,
            .ruby = {.tls_module = module,
                     .tls_ec = b->tls_ec,
                     .ec_vm_stack = l->ec_vm_stack,
                     .ec_vm_stack_size = l->ec_vm_stack_size,
                     .ec_cfp = l->ec_cfp,
                     .cfp_size = l->cfp_size,
                     .cfp_pc = l->cfp_pc,
                     .cfp_iseq = l->cfp_iseq,
                     .cfp_ep = l->cfp_ep,
                     .iseq_body = l->iseq_body,
                     .body_label = l->body_label,
                     .body_first_lineno = l->body_first_lineno,
                     .body_iseq_encoded = l->body_iseq_encoded,
                     .body_iseq_size = l->body_iseq_size,
                     .me_def = l->me_def,
                     .def_original_id = l->def_original_id,
                     .frame_cframe = l->frame_cframe,
                     .frame_finish = l->frame_finish,
                     .env_local = l->env_local,
                     .t_mask = l->t_mask,
                     .t_imemo = l->t_imemo,
                     .fl_ushift = l->fl_ushift,
                     .imemo_ment = l->imemo_ment,
                     .imemo_svar = l->imemo_svar},
            .eval_lo = b->eval_start + bias,
            .eval_hi = b->eval_end + bias,
        };
        return put_entry(s, tgid, &p);
}

int fp_pystack_add_perl(struct fp_pystack *s, pid_t tgid, const struct fp_perl_binary *b,
                        uint64_t bias)
{
        const struct fp_perl_layout *l = b->layout;
        uint64_t slot = 0;
        int r;

        /* The GOT slot the dynamic linker filled: the static TLS offset, or libperl's module ID. */
        if ((r = fp_rt_peek(tgid, b->tls_slot + bias, &slot, sizeof(slot))) < 0)
                return r;
        if (!slot)
                return -EAGAIN; /* (an offset from the thread pointer is never 0: below it) */
        struct fp_pystack_proc p = {
            .minor = (__u32)l->version,
            .kind = FP_PYSTACK_PERL,
            .perl = {.tls_module = b->tls == FP_PERL_TLS_MODULE ? slot : 0,
                     .tls_offset =
                         b->tls == FP_PERL_TLS_MODULE ? (__s64)b->tls_context : (__s64)slot,
                     .interp_curcop = l->interp_curcop,
                     .interp_curstackinfo = l->interp_curstackinfo,
                     .interp_compiling = l->interp_compiling,
                     .si_cxstack = l->si_cxstack,
                     .si_prev = l->si_prev,
                     .si_cxsubix = l->si_cxsubix,
                     .si_type = l->si_type,
                     .cx_size = l->cx_size,
                     .cx_oldcop = l->cx_oldcop,
                     .cx_retop = l->cx_retop,
                     .cx_old_cxsubix = l->cx_old_cxsubix,
                     .cx_cv = l->cx_cv,
                     .cop_line = l->cop_line,
                     .sv_any = l->sv_any,
                     .xcv_gv = l->xcv_gv,
                     .cxt_mask = l->cxt_mask,
                     .cxt_block = l->cxt_block,
                     .cxt_sub = l->cxt_sub,
                     .cxt_format = l->cxt_format,
                     .cxt_eval = l->cxt_eval,
                     .cxp_sub_re_fake = l->cxp_sub_re_fake,
                     .si_main = l->si_main},
            .eval_lo = b->eval_start + bias,
            .eval_hi = b->eval_end + bias,
        };
        return put_entry(s, tgid, &p);
}

int fp_pystack_remove(struct fp_pystack *s, pid_t tgid)
{
        __u32 key = (__u32)tgid;

        if (s->mirror >= 0)
                (void)bpf_map_delete_elem(s->mirror, &key);
        if (bpf_map_delete_elem(bpf_map__fd(s->skel->maps.procs), &key) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

void fp_pystack_mirror(struct fp_pystack *s, int map_fd)
{
        int procs = s->skel ? bpf_map__fd(s->skel->maps.procs) : -1;

        if (procs < 0)
                return;
        if (s->mirror >= 0)
                copy_entries(procs, s->mirror, true);
        s->mirror = map_fd;
        if (map_fd >= 0)
                copy_entries(procs, map_fd, false);
}

int fp_pystack_attach(struct fp_pystack *s, int perf_fd)
{
        if (ioctl(perf_fd, PERF_EVENT_IOC_SET_BPF, fp_pystack_prog_fd(s)) < 0)
                return -errno;
        return 0;
}

int fp_pystack_prog_fd(const struct fp_pystack *s)
{
        return bpf_program__fd(s->skel->progs.fp_pystack_sample);
}

int fp_pystack_poll(struct fp_pystack *s)
{
        int before = s->n, r = ring_buffer__consume(s->ring);

        return r < 0 ? r : s->n - before;
}

#else /* !FP_HAVE_BPF */

int fp_pystack_new(fp_pystack_fn fn, void *userdata, struct fp_pystack **ret, char *err,
                   size_t err_len)
{
        (void)fn;
        (void)userdata;
        (void)ret;
        snprintf(err, err_len, "Python stacks need BPF, and this agent was built without it");
        return -EOPNOTSUPP;
}

void fp_pystack_free(struct fp_pystack *s)
{
        (void)s;
}

int fp_pystack_add(struct fp_pystack *s, pid_t tgid, const struct fp_py_binary *b, uint64_t bias)
{
        (void)s;
        (void)tgid;
        (void)b;
        (void)bias;
        return -EOPNOTSUPP;
}

int fp_pystack_add_php(struct fp_pystack *s, pid_t tgid, const struct fp_php_binary *b,
                       uint64_t bias)
{
        (void)s;
        (void)tgid;
        (void)b;
        (void)bias;
        return -EOPNOTSUPP;
}

int fp_pystack_add_ruby(struct fp_pystack *s, pid_t tgid, const struct fp_ruby_binary *b,
                        uint64_t bias)
{
        (void)s;
        (void)tgid;
        (void)b;
        (void)bias;
        return -EOPNOTSUPP;
}

int fp_pystack_add_perl(struct fp_pystack *s, pid_t tgid, const struct fp_perl_binary *b,
                        uint64_t bias)
{
        (void)s;
        (void)tgid;
        (void)b;
        (void)bias;
        return -EOPNOTSUPP;
}

int fp_pystack_remove(struct fp_pystack *s, pid_t tgid)
{
        (void)s;
        (void)tgid;
        return -EOPNOTSUPP;
}

int fp_pystack_attach(struct fp_pystack *s, int perf_fd)
{
        (void)s;
        (void)perf_fd;
        return -EOPNOTSUPP;
}

void fp_pystack_mirror(struct fp_pystack *s, int map_fd)
{
        (void)s;
        (void)map_fd;
}

int fp_pystack_prog_fd(const struct fp_pystack *s)
{
        (void)s;
        return -EOPNOTSUPP;
}

int fp_pystack_poll(struct fp_pystack *s)
{
        (void)s;
        return -EOPNOTSUPP;
}

#endif
