/* SPDX-License-Identifier: MIT */
/*
 * The core's host tier (host.h): starting it with the per-thread tier's
 * targets as its filter (a process a target profiles is the target's, so
 * no thread is counted by both tiers), closing its bucket into the same
 * batch as the targets', charging a batch that could not be stored back
 * to it, and its part of status. core.c calls these; they call nothing of
 * core.c's.
 */
#include "core-internal.h"
#include "export.h"
#include "log.h"
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Whether a per-thread target profiled pid at time_ns: running, or gone
 * only after then (the host tier's rings are read a moment after the
 * target's, so its process's last records may come after its exit).
 */
static bool covered(void *userdata, pid_t pid, uint64_t time_ns)
{
        struct fp_core *s = userdata;
        for (size_t i = 0; i < s->n_targets; i++) {
                struct fp_target_stats st;
                if (fp_target_pid(s->targets[i].t) != pid)
                        continue;
                fp_target_stats(s->targets[i].t, &st);
                if (st.state == FP_TARGET_RUNNING || time_ns <= st.exited_ns)
                        return true;
        }
        return false;
}

int fp_core_host_start(struct fp_core *s, const struct fp_host_config *cfg, char *err,
                       size_t err_len)
{
        int r = fp_host_start(s->base, s->cache, cfg, covered, s, &s->host, err, err_len);
        if (r == 0)
                fp_log(LOG_INFO, "host tier: every process, cpu-clock at %llu Hz on %u CPUs%s",
                       (unsigned long long)cfg->freq, (unsigned)sysconf(_SC_NPROCESSORS_ONLN),
                       cfg->off_cpu_period ? ", and its off-CPU time" : "");
        return r;
}

void fp_core_host_close_bucket(struct fp_core *s, struct fp_store_batch *b, struct batch_ctx *ctx)
{
        struct fp_host_drop drops[FP_HOST_MAX_DROPS];
        uint32_t idx[1024];
        size_t n_idx = 0, nd;
        int r;

        if (!s->host)
                return;
        /* The drops going into the batch, copied: the export starts the tier's next bucket. */
        nd = fp_host_open_drops(s->host, drops, FP_HOST_MAX_DROPS);
        r = fp_export_host_batch(s->host, b, idx, sizeof(idx) / sizeof(idx[0]), &n_idx);
        if (r < 0) {
                fp_log(LOG_ERR, "Failed to close the host tier's bucket: %s", strerror(-r));
                return;
        }
        ctx->host_idx = malloc((n_idx ? n_idx : 1) * sizeof(*ctx->host_idx));
        if (ctx->host_idx) {
                memcpy(ctx->host_idx, idx, n_idx * sizeof(*idx));
                ctx->n_host_idx = n_idx;
        }
        for (size_t k = 0; k < nd; k++) {
                snprintf(ctx->host_drops[k].reason, sizeof(ctx->host_drops[k].reason), "%s",
                         drops[k].reason);
                ctx->host_drops[k].count = drops[k].count;
        }
        ctx->n_host_drops = nd;
}

void fp_core_host_charge(struct fp_core *s, struct batch_ctx *ctx, struct fp_store_batch *b,
                         const char *reason)
{
        uint64_t n = 0;

        if (!s->host)
                return;
        for (size_t i = 0; i < ctx->n_host_idx; i++)
                n += fp_store_batch_target_count(b, ctx->host_idx[i]);
        if (n)
                fp_host_charge_drop(s->host, reason, n);
        for (size_t k = 0; k < ctx->n_host_drops; k++)
                fp_host_charge_drop(s->host, ctx->host_drops[k].reason, ctx->host_drops[k].count);
}

void fp_core_host_status(struct fp_core *s, struct fp_core_status *st)
{
        struct fp_host_drop drops[FP_HOST_MAX_DROPS];
        size_t nd;

        st->host_on = s->host != NULL;
        if (!s->host)
                return;
        fp_host_drain(s->host);
        st->host_cfg = *fp_host_config(s->host);
        fp_host_stats(s->host, &st->host);
        nd = fp_host_open_drops(s->host, drops, FP_HOST_MAX_DROPS);
        for (size_t k = 0; k < nd && st->n_host_drops < FP_CORE_MAX_DROPS; k++)
                st->host_drops[st->n_host_drops++] =
                    (struct fp_target_drop){drops[k].reason, drops[k].count};
}
