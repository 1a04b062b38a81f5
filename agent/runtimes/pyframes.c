/* SPDX-License-Identifier: MIT */
/*
 * One CPython process's Python frames: see pyframes.h. Two tables: the
 * records waiting for their samples (a queue per thread, oldest first)
 * and the code objects named so far (by address and stamp).
 */
#include "pyframes.h"
#include "maps.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUEUE_MAX 4096 /* records a thread keeps waiting at most (oldest dropped) */
/* A record this much older than its thread's newest, or than fp_pyframes_trim()'s now: no sample
 * is to come for it. */
#define STALE_NS    2000000000ULL
#define LINE_MEMO   8 /* lines remembered per code object (by offset) */
#define ENTRY_SHIFT 32

/* A record as kept: its time, status and frames; taken: a sample's (freed at the head). */
struct rec {
        uint64_t time;
        uint32_t status, n;
        bool taken;
        struct fp_pystack_frame frames[];
};

/*
 * One thread's records in time order (a thread's samples come one after
 * another), oldest first: recs[(head + i) % cap] for i < len. A record
 * stays until it reaches the head taken, or STALE_NS older than a newer
 * one: samples come in time order per ring, and a thread's samples on
 * another CPU's ring (the host tier) may be read after later ones.
 */
struct queue {
        pid_t tid; /* 0: a free slot */
        uint32_t head, len, cap;
        struct rec **recs;
};

struct code {
        uint64_t addr;
        uint32_t stamp;
        uint64_t aux;                      /* a Ruby frame's method entry: its class in the name */
        const struct fp_py_layout *layout; /* of the interpreter it was read under */
        const struct fp_php_layout *php;   /* or PHP's: a zend_function, its lines in frames */
        const struct fp_ruby_layout *ruby; /* or Ruby's: an iseq or a C function's entry */
        const struct fp_perl_layout *perl; /* or Perl's: a CV (or the main program's interpreter) */
        bool named; /* its memory read as a code object whose stamp was the frame's */
        char *name, *filename;
        int firstlineno;
        struct fp_py_code c;    /* its line table */
        struct fp_ruby_code rb; /* Ruby's */
        struct {
                uint64_t off;
                int line;
        } memo[LINE_MEMO];
        unsigned memo_next;
};

struct fp_pyframes {
        pid_t pid;
        uint64_t since;                              /* the program reads it from then on */
        int kind;                                    /* FP_PYSTACK_PYTHON, _PHP, _RUBY, _PERL */
        struct fp_py_binary bin;                     /* a CPython's */
        const struct fp_php_layout *php;             /* a PHP's */
        const struct fp_ruby_layout *ruby;           /* a Ruby's */
        uint64_t ruby_symbols;                       /* its ruby_global_symbols here */
        const struct fp_perl_layout *perl;           /* a Perl's */
        uint64_t eval_lo, eval_hi, cold_lo, cold_hi; /* the process's addresses */
        struct queue *queues;                        /* open addressing by tid */
        size_t n_queues, cap_queues;                 /* cap: a power of two, or 0 */
        struct code *codes;
        size_t n_codes, cap_codes;
        uint32_t *index; /* codes by (addr, stamp): entry + 1, 0 free */
        size_t cap_index;
        struct fp_pyframes_stats st;
};

static struct fp_pyframes *frames_of(pid_t pid)
{
        struct fp_pyframes *p = calloc(1, sizeof(*p));

        if (p)
                p->pid = pid;
        return p;
}

struct fp_pyframes *fp_pyframes_new(pid_t pid, const struct fp_py_binary *b, uint64_t bias)
{
        struct fp_pyframes *p = frames_of(pid);

        if (p)
                fp_pyframes_rebind(p, b, bias);
        return p;
}

struct fp_pyframes *fp_pyframes_new_php(pid_t pid, const struct fp_php_binary *b, uint64_t bias)
{
        struct fp_pyframes *p = frames_of(pid);

        if (p)
                fp_pyframes_rebind_php(p, b, bias);
        return p;
}

struct fp_pyframes *fp_pyframes_new_ruby(pid_t pid, const struct fp_ruby_binary *b, uint64_t bias)
{
        struct fp_pyframes *p = frames_of(pid);

        if (p)
                fp_pyframes_rebind_ruby(p, b, bias);
        return p;
}

struct fp_pyframes *fp_pyframes_new_perl(pid_t pid, const struct fp_perl_binary *b, uint64_t bias)
{
        struct fp_pyframes *p = frames_of(pid);

        if (p)
                fp_pyframes_rebind_perl(p, b, bias);
        return p;
}

static void free_codes(struct fp_pyframes *p)
{
        for (size_t i = 0; i < p->n_codes; i++) {
                free(p->codes[i].name);
                free(p->codes[i].filename);
                fp_py_code_free(&p->codes[i].c);
                fp_ruby_code_free(&p->codes[i].rb);
        }
        p->n_codes = 0;
        if (p->index)
                memset(p->index, 0, p->cap_index * sizeof(*p->index));
}

static void free_queue(struct queue *q)
{
        for (uint32_t i = 0; i < q->len; i++)
                free(q->recs[(q->head + i) % q->cap]);
        free(q->recs);
}

void fp_pyframes_free(struct fp_pyframes *p)
{
        if (!p)
                return;
        for (size_t i = 0; i < p->cap_queues; i++)
                if (p->queues[i].tid)
                        free_queue(&p->queues[i]);
        free(p->queues);
        free_codes(p);
        free(p->codes);
        free(p->index);
        free(p);
}

const struct fp_py_binary *fp_pyframes_binary(const struct fp_pyframes *p)
{
        return &p->bin;
}

const struct fp_pyframes_kind fp_pyframes_kinds[FP_PYSTACK_KINDS] = {
    [FP_PYSTACK_PYTHON] = {"python", "CPython", "Python", "code objects", "[python]"},
    [FP_PYSTACK_PHP] = {"php", "PHP", "PHP", "functions", "[php]"},
    [FP_PYSTACK_RUBY] = {"ruby", "Ruby", "Ruby", "methods", "[ruby]"},
    [FP_PYSTACK_PERL] = {"perl", "Perl", "Perl", "subs", "[perl]"},
};

int fp_pyframes_kind(const struct fp_pyframes *p)
{
        return p->kind;
}

int fp_pyframes_find(int kind, struct fp_maps *m, char *version, size_t len, const char **why)
{
        uint64_t bias;
        int r;

        version[0] = 0;
        if (kind == FP_PYSTACK_PHP) {
                const struct fp_php_binary *b;
                if ((r = fp_php_find(m, &b, &bias, why)) > 0)
                        snprintf(version, len, "%d.%d.%d", b->major, b->minor, b->micro);
        } else if (kind == FP_PYSTACK_RUBY) {
                const struct fp_ruby_binary *b;
                if ((r = fp_ruby_find(m, &b, &bias, why)) > 0)
                        snprintf(version, len, "%d.%d.%d", b->major, b->minor, b->micro);
        } else if (kind == FP_PYSTACK_PERL) {
                const struct fp_perl_binary *b;
                if ((r = fp_perl_find(m, &b, &bias, why)) > 0)
                        snprintf(version, len, "%d.%d.%d", b->revision, b->version, b->subversion);
        } else {
                const struct fp_py_binary *b;
                if ((r = fp_py_find(m, &b, &bias, why)) > 0 && b->micro >= 0)
                        snprintf(version, len, "%d.%d.%d", b->major, b->minor, b->micro);
                else if (r > 0)
                        snprintf(version, len, "%d.%d", b->major, b->minor);
        }
        return r;
}

/* ---- the records ---- */

static struct queue *find_queue(const struct fp_pyframes *p, pid_t tid)
{
        if (!p->cap_queues)
                return NULL;
        for (size_t i = fp_mix64((uint64_t)tid) & (p->cap_queues - 1);;
             i = (i + 1) & (p->cap_queues - 1)) {
                if (p->queues[i].tid == tid)
                        return &p->queues[i];
                if (!p->queues[i].tid)
                        return NULL;
        }
}

/* Puts q (by value) into a table of cap slots with room. */
static struct queue *place_queue(struct queue *table, size_t cap, const struct queue *q)
{
        size_t i = fp_mix64((uint64_t)q->tid) & (cap - 1);

        while (table[i].tid)
                i = (i + 1) & (cap - 1);
        table[i] = *q;
        return &table[i];
}

/* Rebuilds the table at cap slots, dropping the empty queues when drop_empty. */
static int rebuild_queues(struct fp_pyframes *p, size_t cap, bool drop_empty)
{
        struct queue *table = calloc(cap, sizeof(*table));

        if (!table)
                return -ENOMEM;
        p->n_queues = 0;
        for (size_t i = 0; i < p->cap_queues; i++) {
                struct queue *q = &p->queues[i];
                if (!q->tid)
                        continue;
                if (drop_empty && !q->len) {
                        free_queue(q);
                        continue;
                }
                place_queue(table, cap, q);
                p->n_queues++;
        }
        free(p->queues);
        p->queues = table;
        p->cap_queues = cap;
        return 0;
}

static struct queue *queue_of(struct fp_pyframes *p, pid_t tid)
{
        struct queue *q = find_queue(p, tid);

        if (q)
                return q;
        if ((p->n_queues + 1) * 2 > p->cap_queues &&
            rebuild_queues(p, p->cap_queues ? p->cap_queues * 2 : 16, false) < 0)
                return NULL;
        p->n_queues++;
        return place_queue(p->queues, p->cap_queues, &(struct queue){.tid = tid});
}

static struct rec *queue_pop(struct queue *q)
{
        struct rec *r = q->recs[q->head];

        q->head = (q->head + 1) % q->cap;
        q->len--;
        return r;
}

static struct rec *queue_at(const struct queue *q, uint32_t i)
{
        return q->recs[(q->head + i) % q->cap];
}

/* Frees the oldest record, counted when no sample took it. */
static void drop_oldest(struct fp_pyframes *p, struct queue *q)
{
        struct rec *r = queue_pop(q);

        if (!r->taken)
                p->st.records_unmatched++;
        free(r);
}

void fp_pyframes_reading_since(struct fp_pyframes *p, uint64_t time)
{
        p->since = time;
}

/* The old program's records have no sample to come. */
static void drop_records(struct fp_pyframes *p)
{
        for (size_t i = 0; i < p->cap_queues; i++)
                while (p->queues[i].tid && p->queues[i].len)
                        drop_oldest(p, &p->queues[i]);
}

void fp_pyframes_rebind(struct fp_pyframes *p, const struct fp_py_binary *b, uint64_t bias)
{
        p->kind = FP_PYSTACK_PYTHON;
        p->bin = *b;
        p->php = NULL;
        p->ruby = NULL;
        p->perl = NULL;
        p->eval_lo = b->eval_end ? b->eval_start + bias : 0;
        p->eval_hi = b->eval_end ? b->eval_end + bias : 0;
        p->cold_lo = b->eval_cold_end ? b->eval_cold_start + bias : 0;
        p->cold_hi = b->eval_cold_end ? b->eval_cold_end + bias : 0;
        drop_records(p);
}

void fp_pyframes_rebind_php(struct fp_pyframes *p, const struct fp_php_binary *b, uint64_t bias)
{
        memset(&p->bin, 0, sizeof(p->bin));
        p->kind = FP_PYSTACK_PHP;
        p->php = b->layout;
        p->ruby = NULL;
        p->perl = NULL;
        p->eval_lo = b->eval_start + bias;
        p->eval_hi = b->eval_end + bias;
        p->cold_lo = p->cold_hi = 0;
        drop_records(p);
}

void fp_pyframes_rebind_ruby(struct fp_pyframes *p, const struct fp_ruby_binary *b, uint64_t bias)
{
        memset(&p->bin, 0, sizeof(p->bin));
        p->kind = FP_PYSTACK_RUBY;
        p->php = NULL;
        p->ruby = b->layout;
        p->perl = NULL;
        p->ruby_symbols = b->symbols ? b->symbols + bias : 0;
        p->eval_lo = b->eval_start + bias;
        p->eval_hi = b->eval_end + bias;
        p->cold_lo = p->cold_hi = 0;
        drop_records(p);
}

void fp_pyframes_rebind_perl(struct fp_pyframes *p, const struct fp_perl_binary *b, uint64_t bias)
{
        memset(&p->bin, 0, sizeof(p->bin));
        p->kind = FP_PYSTACK_PERL;
        p->php = NULL;
        p->ruby = NULL;
        p->perl = b->layout;
        p->eval_lo = b->eval_start + bias;
        p->eval_hi = b->eval_end + bias;
        /* Perl_runops_debug, the run loop a Devel:: module may set */
        p->cold_lo = b->debug_end ? b->debug_start + bias : 0;
        p->cold_hi = b->debug_end ? b->debug_end + bias : 0;
        drop_records(p);
}

static int queue_push(struct queue *q, struct rec *r)
{
        if (q->len == q->cap) {
                uint32_t cap = q->cap ? q->cap * 2 : 8;
                struct rec **recs = malloc(cap * sizeof(*recs));
                if (!recs)
                        return -ENOMEM;
                for (uint32_t i = 0; i < q->len; i++)
                        recs[i] = q->recs[(q->head + i) % q->cap];
                free(q->recs);
                q->recs = recs;
                q->cap = cap;
                q->head = 0;
        }
        q->recs[(q->head + q->len) % q->cap] = r;
        q->len++;
        return 0;
}

void fp_pyframes_record(struct fp_pyframes *p, const struct fp_pystack_record *r)
{
        uint32_t n = r->n_frames < FP_PYSTACK_MAX_FRAMES ? r->n_frames : FP_PYSTACK_MAX_FRAMES;
        struct queue *q = queue_of(p, (pid_t)r->tid);
        struct rec *k;

        p->st.records++;
        if (!q || !(k = malloc(sizeof(*k) + n * sizeof(k->frames[0])))) {
                p->st.records_unmatched++;
                return;
        }
        k->time = r->time_ns;
        k->status = r->status;
        k->n = n;
        k->taken = false;
        memcpy(k->frames, r->frames, n * sizeof(k->frames[0]));
        while (q->len && (q->len >= QUEUE_MAX || queue_at(q, 0)->taken ||
                          queue_at(q, 0)->time + STALE_NS < k->time))
                drop_oldest(p, q);
        if (queue_push(q, k) < 0) {
                free(k);
                p->st.records_unmatched++;
        }
}

/*
 * The record of tid's sample at time, marked taken (it stays the queue's,
 * valid until the thread's next record), or NULL: the first in
 * [time - FP_PYFRAMES_MATCH_EARLY_NS, time + FP_PYFRAMES_MATCH_NS].
 */
static struct rec *take_record(struct fp_pyframes *p, pid_t tid, uint64_t time)
{
        struct queue *q = find_queue(p, tid);
        struct rec *best = NULL;
        uint32_t lo = 0, hi;

        if (!q)
                return NULL;
        while (q->len && queue_at(q, 0)->taken)
                free(queue_pop(q));
        /* The first record not before the window. */
        for (hi = q->len; lo < hi;) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (queue_at(q, mid)->time + FP_PYFRAMES_MATCH_EARLY_NS < time)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (uint32_t i = lo; i < q->len; i++) {
                struct rec *r = queue_at(q, i);
                if (r->time > time + FP_PYFRAMES_MATCH_NS)
                        break;
                if (!r->taken) {
                        best = r;
                        break;
                }
        }
        if (best)
                best->taken = true;
        return best;
}

/* ---- the code objects ---- */

static int grow_index(struct fp_pyframes *p)
{
        size_t cap = p->cap_index ? p->cap_index * 2 : 256;
        uint32_t *index = calloc(cap, sizeof(*index));

        if (!index)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_codes; i++) {
                size_t j = fp_mix64(p->codes[i].addr ^ p->codes[i].stamp) & (cap - 1);
                while (index[j])
                        j = (j + 1) & (cap - 1);
                index[j] = (uint32_t)i + 1;
        }
        free(p->index);
        p->index = index;
        p->cap_index = cap;
        return 0;
}

/*
 * Reads the code object a frame names (once: cached), or NULL when the
 * table is full; flags the frame's: a Ruby C function's (FP_PYSTACK_NATIVE),
 * Perl's main program (FP_PYSTACK_MAIN); aux a Ruby frame's method entry
 * (0 for none, and for the other runtimes).
 */
static struct code *code_of(struct fp_pyframes *p, uint64_t addr, uint32_t stamp, uint32_t flags,
                            uint64_t aux, uint32_t *ret_i)
{
        size_t j;

        if (p->cap_index) {
                for (j = fp_mix64(addr ^ stamp) & (p->cap_index - 1); p->index[j];
                     j = (j + 1) & (p->cap_index - 1)) {
                        struct code *c = &p->codes[p->index[j] - 1];
                        if (c->addr == addr && c->stamp == stamp && c->aux == aux) {
                                *ret_i = p->index[j] - 1;
                                return c;
                        }
                }
        }
        if (p->n_codes >= FP_PYFRAMES_CODES) {
                p->st.codes_full++;
                return NULL;
        }
        if ((p->n_codes + 1) * 2 > p->cap_index && grow_index(p) < 0)
                return NULL;
        if (p->n_codes == p->cap_codes) {
                size_t cap = p->cap_codes ? p->cap_codes * 2 : 64;
                struct code *codes = realloc(p->codes, cap * sizeof(*codes));
                if (!codes)
                        return NULL;
                p->codes = codes;
                p->cap_codes = cap;
        }
        struct code *c = &p->codes[p->n_codes];
        memset(c, 0, sizeof(*c));
        c->addr = addr;
        c->stamp = stamp;
        c->aux = aux;
        c->layout = p->bin.layout;
        c->php = p->php;
        c->ruby = p->ruby;
        c->perl = p->perl;
        /* Read now, while the sampled code object surely still lives. */
        if (c->perl) {
                struct fp_perl_code pc;
                uint64_t body = 0, gv = 0;
                bool is_main = flags & FP_PYSTACK_MAIN;
                int r = is_main ? fp_perl_main_read(p->pid, c->perl, addr, &pc)
                                : fp_perl_code_read(p->pid, c->perl, addr, &pc, &body, &gv);
                if (r == 0 &&
                    (is_main ? FP_PYSTACK_STAMP(addr, 0) : FP_PYSTACK_STAMP(body, gv)) == stamp) {
                        c->name = strdup(pc.name);
                        c->filename = strdup(pc.filename);
                        c->named = c->name && c->filename;
                }
        } else if (c->ruby) {
                uint32_t st = 0;
                if (fp_ruby_code_read(p->pid, c->ruby, p->ruby_symbols, addr, aux,
                                      flags & FP_PYSTACK_NATIVE, &c->rb, &st) == 0 &&
                    st == stamp) {
                        c->name = strdup(c->rb.name);
                        c->filename = strdup(c->rb.filename);
                        c->firstlineno = c->rb.first_line;
                        c->named = c->name && c->filename;
                }
                if (!c->named)
                        fp_ruby_code_free(&c->rb);
        } else if (c->php) {
                struct fp_php_function fn;
                if (fp_php_function_read(p->pid, c->php, addr, &fn) == 0 &&
                    fp_php_stamp(&fn) == stamp) {
                        c->name = strdup(fn.name);
                        c->filename = strdup(fn.filename);
                        c->firstlineno = fn.line_start;
                        c->named = c->name && c->filename;
                }
        } else if (fp_py_code_read(p->pid, p->bin.layout, addr, &c->c) == 0) {
                if (FP_PYSTACK_STAMP(c->c.name_addr, c->c.firstlineno) == stamp) {
                        c->name = strdup(c->c.name[0] ? c->c.name : "<no name>");
                        c->filename = strdup(c->c.filename);
                        c->firstlineno = c->c.firstlineno;
                        c->named = c->name && c->filename;
                }
                if (!c->named)
                        fp_py_code_free(&c->c);
        }
        p->st.codes++;
        p->st.codes_unnamed += !c->named;
        for (j = fp_mix64(addr ^ stamp) & (p->cap_index - 1); p->index[j];
             j = (j + 1) & (p->cap_index - 1))
                ;
        p->index[j] = (uint32_t)p->n_codes + 1;
        *ret_i = (uint32_t)p->n_codes++;
        return c;
}

static int line_of(struct code *c, uint64_t instr)
{
        if (c->php || c->perl) /* the line itself, read with the frame */
                return instr < INT32_MAX ? (int)instr : 0;
        uint64_t off = c->ruby ? instr : fp_py_instr_offset(c->layout, c->addr, instr);

        for (unsigned i = 0; i < LINE_MEMO; i++)
                if (c->memo[i].line && c->memo[i].off == off)
                        return c->memo[i].line;
        int line = c->ruby ? fp_ruby_line(&c->rb, off) : fp_py_line(c->layout, &c->c, off);
        if (line > 0) {
                c->memo[c->memo_next].off = off;
                c->memo[c->memo_next].line = line;
                c->memo_next = (c->memo_next + 1) % LINE_MEMO;
        }
        return line;
}

/* The frame of a Python frame the program read. */
static struct fp_frame python_frame(struct fp_pyframes *p, const struct fp_pystack_frame *pf)
{
        uint32_t i = UINT32_MAX;
        uint64_t aux = p->kind == FP_PYSTACK_RUBY && !(pf->flags & FP_PYSTACK_NATIVE) ? pf->aux : 0;
        struct code *c = code_of(p, pf->code, pf->stamp, pf->flags, aux, &i);
        int line = 0;

        if (c && c->named)
                line = line_of(c, pf->instr);
        else
                p->st.frames_unnamed++;
        return (struct fp_frame){.addr =
                                     (uint64_t)i << ENTRY_SHIFT | (uint32_t)(line > 0 ? line : 0),
                                 .mapping = 0,
                                 .flags = FP_FRAME_PYTHON};
}

/* ---- splicing ---- */

static bool in_range(const struct fp_pyframes *p, const struct fp_frame *f)
{
        if (f->flags)
                return false;
        return (f->addr >= p->eval_lo && f->addr < p->eval_hi) ||
               (f->addr >= p->cold_lo && f->addr < p->cold_hi);
}

/*
 * Whether native frame i of f (n) is an evaluation's: in the range
 * (_PyEval_EvalFrameDefault, execute_ex) or, for Ruby, the frame
 * rb_vm_exec called (its loop, vm_exec_core, which has no symbol).
 */
static bool in_eval(const struct fp_pyframes *p, const struct fp_frame *f, uint32_t i, uint32_t n)
{
        if (p->kind == FP_PYSTACK_RUBY)
                return i + 1 < n && !f[i].flags && in_range(p, &f[i + 1]);
        return in_range(p, &f[i]);
}

/*
 * Splices the Python frames pf (nf, innermost first) into the native stack
 * f (n frames, leaf first, room for max): the new count.
 */
static uint32_t splice(struct fp_pyframes *p, const struct fp_pystack_frame *pf, uint32_t nf,
                       struct fp_frame *f, uint32_t n, uint32_t max)
{
        struct fp_frame out[FP_PYSTACK_MAX_FRAMES];
        uint32_t gi = 0;

        /* Where each group of Python frames goes: leafward of the native frame slot[g]. */
        uint32_t slot[FP_PYSTACK_MAX_FRAMES + 1], group_end[FP_PYSTACK_MAX_FRAMES + 1];
        uint32_t groups = 0, evals = 0;
        for (uint32_t i = 0; i < n; i++) {
                if (!in_eval(p, f, i, n))
                        continue;
                evals++;
                if (gi == nf)
                        continue;
                slot[groups] = i;
                while (gi < nf && !(pf[gi++].flags & FP_PYSTACK_ENTRY))
                        ;
                group_end[groups++] = gi;
        }
        p->st.evals_without += evals - groups;
        /*
         * Ruby's loop (vm_exec_core) has no symbol: each of its addresses
         * would read as a function of its own, so its Ruby frames take its
         * place. (CPython's and PHP's loops are named: they stay.)
         */
        uint32_t drops = p->kind == FP_PYSTACK_RUBY ? groups : 0, native_groups = groups;
        /* Left over (the native stack was cut short): at the root end, before [truncated]. */
        if (gi < nf) {
                slot[groups] = n && (f[n - 1].flags & FP_FRAME_TRUNCATED) ? n - 1 : n;
                group_end[groups++] = nf;
        }
        for (uint32_t i = 0; i < nf; i++)
                out[i] = python_frame(p, &pf[i]);
        /*
         * In place, from the root end: a frame only moves rootward, so none
         * is overwritten before it moved. What falls past max is cut.
         */
        uint32_t pos = n + nf - drops, g = groups, len = pos < max ? pos : max;
        for (int64_t i = n; i >= 0; i--) {
                bool at_slot = g && slot[g - 1] == (uint32_t)i;
                if (i < (int64_t)n && !(at_slot && drops && g - 1 < native_groups) && --pos < max)
                        f[pos] = f[i];
                if (at_slot) {
                        g--;
                        for (uint32_t from = group_end[g]; from > (g ? group_end[g - 1] : 0);)
                                if (--pos < max)
                                        f[pos] = out[--from];
                                else
                                        from--;
                }
        }
        if (n + nf - drops > max)
                f[max - 1] = (struct fp_frame){.flags = FP_FRAME_TRUNCATED};
        return len;
}

uint32_t fp_pyframes_merge(struct fp_pyframes *p, pid_t tid, uint64_t time, struct fp_frame *f,
                           uint32_t n, uint32_t max)
{
        struct rec *r = take_record(p, tid, time);

        if (!r) {
                /* (Its process is read from some time on; a sample before it lags in its ring.) */
                if (time < p->since)
                        p->st.early++;
                else
                        p->st.no_record++;
                return n;
        }
        if (r->status == FP_PYSTACK_NO_THREAD_STATE) {
                p->st.no_thread_state++;
                return n;
        }
        if (r->status == FP_PYSTACK_UNREADABLE)
                p->st.unreadable++; /* what read is kept */
        else if (r->status == FP_PYSTACK_TRUNCATED)
                p->st.truncated++;
        if (r->n)
                p->st.samples++;
        return splice(p, r->frames, r->n, f, n, max);
}

uint32_t fp_pyframes_splice(struct fp_pyframes *p, const struct fp_pystack_record *r,
                            struct fp_frame *f, uint32_t n, uint32_t max)
{
        uint32_t nf = !r                                    ? 0
                      : r->n_frames < FP_PYSTACK_MAX_FRAMES ? r->n_frames
                                                            : FP_PYSTACK_MAX_FRAMES;

        if (!nf) {
                p->st.offcpu_without++;
                return n;
        }
        p->st.offcpu++;
        return splice(p, r->frames, nf, f, n, max);
}

/* ---- names ---- */

void fp_pyframes_name(const struct fp_pyframes *p, const struct fp_frame *f,
                      struct fp_pyframe_name *ret)
{
        uint64_t i = f->addr >> ENTRY_SHIFT;
        const struct code *c = i < p->n_codes ? &p->codes[i] : NULL;

        ret->line = (int64_t)(uint32_t)f->addr;
        ret->named = c && c->named;
        if (!c || !c->named) {
                /* The runtime it was sampled under (a Ruby's, though the process exec'd PHP). */
                unsigned kind = !c        ? p->kind
                                : c->php  ? FP_PYSTACK_PHP
                                : c->ruby ? FP_PYSTACK_RUBY
                                : c->perl ? FP_PYSTACK_PERL
                                          : FP_PYSTACK_PYTHON;
                ret->function = fp_pyframes_kinds[kind].unread;
                ret->system_name = NULL;
                ret->filename = "";
                ret->start_line = 0;
                return;
        }
        ret->function = c->name;
        ret->system_name = c->name;
        ret->filename = c->filename;
        ret->start_line = c->firstlineno;
}

void fp_pyframes_trim(struct fp_pyframes *p)
{
        uint64_t now = fp_now_ns(CLOCK_MONOTONIC);

        if (p->n_codes > FP_PYFRAMES_CODES / 2)
                free_codes(p);
        for (size_t i = 0; i < p->cap_queues; i++) {
                struct queue *q = &p->queues[i];
                while (q->tid && q->len && queue_at(q, 0)->time + STALE_NS < now)
                        drop_oldest(p, q);
        }
        /* Threads gone leave empty queues: dropped when they are most of the table. */
        size_t empty = 0;
        for (size_t i = 0; i < p->cap_queues; i++)
                empty += p->queues[i].tid && !p->queues[i].len;
        if (empty > 64 && empty * 2 > p->n_queues)
                (void)rebuild_queues(p, p->cap_queues, true);
}

void fp_pyframes_stats(const struct fp_pyframes *p, struct fp_pyframes_stats *ret)
{
        *ret = p->st;
}

void fp_pyframes_stats_add(struct fp_pyframes_stats *a, const struct fp_pyframes_stats *b)
{
        a->samples += b->samples;
        a->early += b->early;
        a->no_record += b->no_record;
        a->no_thread_state += b->no_thread_state;
        a->unreadable += b->unreadable;
        a->truncated += b->truncated;
        a->records += b->records;
        a->records_unmatched += b->records_unmatched;
        a->evals_without += b->evals_without;
        a->frames_unnamed += b->frames_unnamed;
        a->codes_full += b->codes_full;
        a->codes += b->codes;
        a->codes_unnamed += b->codes_unnamed;
        a->offcpu += b->offcpu;
        a->offcpu_without += b->offcpu_without;
}

/* ---- a sampled process's Python state ---- */

/* fp_pyproc_known()'s look for a PHP, a Ruby or a Perl, once no CPython was found. */
static bool other_known(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid, struct fp_maps *m)
{
        const struct fp_php_binary *php;
        const struct fp_ruby_binary *rb;
        const struct fp_perl_binary *pl;
        const char *why;
        uint64_t bias;
        int r = pp->off & (1u << FP_PYSTACK_PHP) ? 0 : fp_php_find(m, &php, &bias, &why);

        if (r > 0) {
                if (pp->py)
                        fp_pyframes_rebind_php(pp->py, php, bias);
                else
                        pp->py = fp_pyframes_new_php(pid, php, bias);
                pp->live = pp->py && fp_pystack_add_php(s, pid, php, bias) == 0;
        } else if (r == 0 && !(pp->off & (1u << FP_PYSTACK_RUBY)) &&
                   (r = fp_ruby_find(m, &rb, &bias, &why)) > 0) {
                if (pp->py)
                        fp_pyframes_rebind_ruby(pp->py, rb, bias);
                else
                        pp->py = fp_pyframes_new_ruby(pid, rb, bias);
                pp->live = pp->py && fp_pystack_add_ruby(s, pid, rb, bias) == 0;
        } else if (r == 0 && !(pp->off & (1u << FP_PYSTACK_PERL)) &&
                   (r = fp_perl_find(m, &pl, &bias, &why)) > 0) {
                if (pp->py)
                        fp_pyframes_rebind_perl(pp->py, pl, bias);
                else
                        pp->py = fp_pyframes_new_perl(pid, pl, bias);
                pp->live = pp->py && fp_pystack_add_perl(s, pid, pl, bias) == 0;
        }
        if (r < 0)
                pp->refused = true;
        if (pp->live)
                fp_pyframes_reading_since(pp->py, fp_now_ns(CLOCK_MONOTONIC));
        return false;
}

bool fp_pyproc_known(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid, struct fp_maps *m,
                     uint64_t time)
{
        const struct fp_py_binary *b;
        const char *why;
        uint64_t bias;

        if (pp->py && pp->live)
                return true;
        if (pp->refused || (pp->check_ns && time < pp->check_ns + FP_PYPROC_CHECK_NS))
                return false;
        if (!pp->check_ns) {
                /* A first look: the interpreter's file read now. */
                fp_py_read_files(m);
                fp_maps_read_files_named(m, "php");
                fp_maps_read_files_named(m, "ruby");
                fp_maps_read_files_named(m, "perl");
        }
        pp->check_ns = time;
        int r = pp->off & (1u << FP_PYSTACK_PYTHON) ? 0 : fp_py_find(m, &b, &bias, &why);
        if (r == 0)
                return other_known(pp, s, pid, m);
        if (r < 0)
                pp->refused = true; /* said once per file; its samples stay native-only */
        if (r <= 0)
                return false;
        /* (After an exec: the frames the bucket holds keep the old program's names.) */
        if (pp->py)
                fp_pyframes_rebind(pp->py, b, bias);
        else
                pp->py = fp_pyframes_new(pid, b, bias);
        pp->live = pp->py && fp_pystack_add(s, pid, b, bias) == 0;
        if (pp->live)
                fp_pyframes_reading_since(pp->py, fp_now_ns(CLOCK_MONOTONIC));
        return false; /* its samples have records from now on */
}

uint32_t fp_pyproc_merge(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid, struct fp_maps *m,
                         pid_t tid, uint64_t time, struct fp_frame *f, uint32_t n, uint32_t max)
{
        if (!s || !fp_pyproc_known(pp, s, pid, m, time))
                return n;
        /* Its record went into the ring before the sample into its own: hand them out. */
        (void)fp_pystack_poll(s);
        return fp_pyframes_merge(pp->py, tid, time, f, n, max);
}

uint32_t fp_pyproc_splice(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid, struct fp_maps *m,
                          uint64_t time, const struct fp_pystack_record *r, struct fp_frame *f,
                          uint32_t n, uint32_t max)
{
        if (!s || !fp_pyproc_known(pp, s, pid, m, time))
                return n;
        return fp_pyframes_splice(pp->py, r, f, n, max);
}

void fp_pyproc_forget(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid)
{
        if (pp->live)
                (void)fp_pystack_remove(s, pid);
        pp->live = false;
        pp->refused = false;
        pp->check_ns = 0;
}

void fp_pyproc_free(struct fp_pyproc *pp, struct fp_pystack *s, pid_t pid)
{
        fp_pyproc_forget(pp, s, pid);
        fp_pyframes_free(pp->py);
        pp->py = NULL;
}
