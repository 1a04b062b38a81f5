// SPDX-License-Identifier: MIT
/*
 * libfakeruby.so — a library that says it is Ruby 3.1's and lies
 * (tests/integration/test-ruby.sh, through tests/workloads/fakeruby.c).
 *
 * It exports what the agent recognises libruby by (ruby_current_vm_ptr,
 * rb_vm_exec, the thread-local ruby_current_ec, ruby_version "3.1.2") and
 * lays out, where Ruby 3.1 keeps them, an execution context whose control
 * frames depend on the mode rb_vm_exec() is given:
 *
 *   told   one well-formed frame: an iseq labelled "told_method" from
 *          "told.rb", first line 7, in a local environment with no method
 *          entry: the frame should be named what the process says;
 *   junk   frames whose environment and iseq pointers lead nowhere (an
 *          address past user space's): nothing to name, every sample kept;
 *   deep   300 frames of told's kind: the walk stops at its bound;
 *   loop   a frame whose environment is its own previous one (the walk to
 *          a block's method would go round forever), whose method-entry
 *          slot is an svar holding itself, and whose label is a string
 *          claiming 2^40 bytes.
 *
 * rb_vm_exec() spins in fake_vm_exec_core() (Ruby's loop, which it calls)
 * for the given seconds of CPU time with its frames in place.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#define EXPORT   __attribute__((used, visibility("default")))
#define NOINLINE __attribute__((noinline, noclone))

EXPORT __thread void *ruby_current_ec;
EXPORT void *ruby_current_vm_ptr;
EXPORT const char ruby_version[] = "3.1.2";

#define T_STRING     0x05u
#define T_IMEMO      0x1au
#define EMBED_SHIFT  14
#define NOEMBED      (1u << 13)
#define FRAME_FINISH 0x20u
#define ENV_LOCAL    0x02u
#define IMEMO_SVAR   2u
#define CFP_WORDS    8 /* rb_control_frame_t: 64 bytes */
#define FRAMES_MAX   320

struct rstring {
        uint64_t flags, klass;
        union {
                char ary[24]; /* embedded */
                struct {
                        uint64_t len;
                        const char *ptr;
                } heap;
        } as;
};

static struct rstring label_told, path_told, label_huge;
static uint64_t body[24];    /* rb_iseq_constant_body, as far as it is read */
static uint64_t iseq[3];     /* rb_iseq_t: flags, wrapper, body */
static uint64_t encoded[4];  /* its instructions */
static uint64_t env[4];      /* ep[-2] me_cref, ep[-1] specval, ep[0] flags */
static uint64_t loop_env[4]; /* loop's */
static uint64_t svar[2];     /* an imemo_svar: flags, cref_or_me */
static uint64_t stack[1024 + FRAMES_MAX * CFP_WORDS];
static uint64_t ec[3]; /* vm_stack, vm_stack_size (VALUEs), cfp */
static volatile uint64_t sink;

static void embedded(struct rstring *s, const char *text)
{
        size_t n = strlen(text);

        s->flags = T_STRING | (uint64_t)n << EMBED_SHIFT;
        memcpy(s->as.ary, text, n);
}

/* The context's frames: n of them (from the stack's top down), then the thread's dummy. */
static void frames(int n, uint64_t iseq_addr, uint64_t ep_addr)
{
        size_t words = sizeof(stack) / sizeof(stack[0]);
        uint64_t *top = stack + words - (size_t)(n + 1) * CFP_WORDS;

        for (int i = 0; i < n; i++) {
                uint64_t *cfp = top + (size_t)i * CFP_WORDS;
                cfp[0] = (uint64_t)(uintptr_t)&encoded[1]; /* pc */
                cfp[2] = iseq_addr;
                cfp[4] = ep_addr;
        }
        ec[0] = (uint64_t)(uintptr_t)stack;
        ec[1] = words;
        ec[2] = (uint64_t)(uintptr_t)top;
}

static void setup(const char *mode)
{
        embedded(&label_told, "told_method");
        embedded(&path_told, "told.rb");
        body[0] = (uint64_t)4 << 32;                /* iseq_size, the u32 at 4 */
        body[8 / 8] = (uint64_t)(uintptr_t)encoded; /* iseq_encoded */
        body[64 / 8] = (uint64_t)(uintptr_t)&path_told;
        body[80 / 8] = (uint64_t)(uintptr_t)&label_told;
        body[88 / 8] = 7 << 1 | 1; /* first_lineno, a Fixnum */
        iseq[2] = (uint64_t)(uintptr_t)body;
        env[3] = FRAME_FINISH | ENV_LOCAL; /* ep[0] */
        uint64_t ep = (uint64_t)(uintptr_t)&env[3];

        if (strcmp(mode, "told") == 0) {
                frames(1, (uint64_t)(uintptr_t)iseq, ep);
        } else if (strcmp(mode, "deep") == 0) {
                frames(300, (uint64_t)(uintptr_t)iseq, ep);
        } else if (strcmp(mode, "loop") == 0) {
                uint64_t lep = (uint64_t)(uintptr_t)&loop_env[3];
                loop_env[3] = FRAME_FINISH; /* not local: look at the previous one */
                loop_env[2] = lep | 1;      /* ep[-1]: itself, tagged as a previous ep */
                svar[0] = T_IMEMO | IMEMO_SVAR << 12;
                svar[1] = (uint64_t)(uintptr_t)svar; /* an svar holding itself */
                loop_env[1] = (uint64_t)(uintptr_t)svar;
                label_huge.flags = T_STRING | NOEMBED;
                label_huge.as.heap.len = 1ULL << 40;
                label_huge.as.heap.ptr = "loop_method";
                body[80 / 8] = (uint64_t)(uintptr_t)&label_huge;
                frames(1, (uint64_t)(uintptr_t)iseq, lep);
        } else { /* junk: an address no user mapping can hold (past 47 bits) */
                uint64_t g = 0x4141414141414000ULL;
                frames(4, g + 64, g + 128);
        }
}

static uint64_t cpu_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

NOINLINE void fake_vm_exec_core(double seconds);
NOINLINE void fake_vm_exec_core(double seconds)
{
        uint64_t end = cpu_ns() + (uint64_t)(seconds * 1e9);

        while (cpu_ns() < end)
                for (int i = 0; i < 10000; i++)
                        sink += (uint64_t)i * (uint64_t)i;
}

EXPORT NOINLINE void rb_vm_exec(const char *mode, double seconds);
EXPORT NOINLINE void rb_vm_exec(const char *mode, double seconds)
{
        static uint64_t vm;

        ruby_current_vm_ptr = &vm;
        setup(mode);
        ruby_current_ec = ec;
        fake_vm_exec_core(seconds);
        ruby_current_ec = NULL;
}
