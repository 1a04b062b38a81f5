// SPDX-License-Identifier: MIT
/*
 * fakev8 — a process that says it is V8 and lies (tests/integration/test-v8.sh).
 *
 * It exports v8dbg_* symbols describing a small layout of its own, and runs
 * a loop in anonymous executable memory whose frame holds, where V8 keeps
 * them, a context (any heap object) and a "function": what the function
 * slot leads to depends on the mode:
 *
 *   told      a well-formed chain (JSFunction -> SharedFunctionInfo -> a
 *             one-byte string "toldName", a Script named "told.js"): the
 *             frame should be named what the process says;
 *   junk      a heap-object-tagged pointer to bytes that are no object;
 *   unmapped  a tagged pointer into memory that is not mapped;
 *   cycle     a well-formed chain whose name is a ConsString made of
 *             itself (followed a bounded depth, then given up);
 *   huge      a chain whose name is a one-byte string of 2^31-1 characters
 *             (a bounded prefix read, the rest never).
 *
 * Built a second time as fakev8-compressed with FAKEV8_TAGGED_SIZE 4 (a
 * pointer-compressed V8, which the agent refuses to read).
 *
 * Usage: fakev8 MODE [--seconds S] [--ready FILE]
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef FAKEV8_TAGGED_SIZE
#define FAKEV8_TAGGED_SIZE 8
#endif

#define USED __attribute__((used))

/* The layout it claims (offsets from an object's untagged start). */
USED int v8dbg_TaggedSize = FAKEV8_TAGGED_SIZE;
USED int v8dbg_SmiShiftSize = 31;
USED int v8dbg_SmiTagMask = 1;
USED int v8dbg_HeapObjectTag = 1;
USED int v8dbg_HeapObjectTagMask = 3;
USED int v8dbg_off_fp_function = -16;
USED int v8dbg_off_fp_context = -8;
USED int v8dbg_class_HeapObject__map__Map = 0;
USED int v8dbg_class_Map__instance_type__uint16_t = 8;
USED int v8dbg_class_JSFunction__shared__SharedFunctionInfo = 24;
USED int v8dbg_class_SharedFunctionInfo__name_or_scope_info__Object = 8;
USED int v8dbg_class_SharedFunctionInfo__script_or_debug_info__HeapObject = 16;
USED int v8dbg_class_Script__name__Object = 8;
USED int v8dbg_class_Script__source__Object = 16;
USED int v8dbg_class_String__length__int32_t = 8;
USED int v8dbg_class_SeqOneByteString__chars__char = 16;
USED int v8dbg_class_SeqTwoByteString__chars__char = 16;
USED int v8dbg_class_ConsString__first__String = 16;
USED int v8dbg_class_ConsString__second__String = 24;
USED int v8dbg_class_ThinString__actual__String = 16;
USED int v8dbg_class_SlicedString__parent__String = 16;
USED int v8dbg_class_SlicedString__offset__SMI = 24;
USED int v8dbg_scopeinfo_idx_first_vars = 3;
USED int v8dbg_scopeinfo_idx_ncontextlocals = 2;
USED int v8dbg_IsNotStringMask = 0x40;
USED int v8dbg_StringTag = 0;
USED int v8dbg_StringRepresentationMask = 7;
USED int v8dbg_StringEncodingMask = 8;
USED int v8dbg_SeqStringTag = 0;
USED int v8dbg_ConsStringTag = 1;
USED int v8dbg_SlicedStringTag = 3;
USED int v8dbg_ThinStringTag = 5;
USED int v8dbg_OneByteStringTag = 8;
USED int v8dbg_TwoByteStringTag = 0;
USED int v8dbg_FirstNonstringType = 64;
USED int v8dbg_type_JSFunction__JS_FUNCTION_TYPE = 100;
USED int v8dbg_type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE = 120;
USED int v8dbg_type_Script__SCRIPT_TYPE = 121;
USED int v8dbg_type_ScopeInfo__SCOPE_INFO_TYPE = 122;

enum { T_SEQ_ONE = 8, T_CONS_ONE = 9, T_JSFUNCTION = 100, T_SFI = 120, T_SCRIPT = 121 };

/* Objects: 8-byte words, the map first; maps hold their type at byte 8. */
struct map {
        uint64_t map;
        uint16_t type;
};
struct object {
        uint64_t w[8];
};
struct string {
        uint64_t map;
        int32_t length, pad;
        char chars[64];
};

static struct map maps[6];
static struct object function, sfi, script, junk;
static struct string name, file, huge;
static struct {
        uint64_t map;
        int32_t length, pad;
        uint64_t first, second;
} cons;

static uint64_t tag(const void *p)
{
        return (uint64_t)(uintptr_t)p + 1;
}

static void string_of(struct string *s, struct map *m, const char *text, int32_t length)
{
        s->map = tag(m);
        s->length = length;
        snprintf(s->chars, sizeof(s->chars), "%s", text);
}

/* The function slot's value for mode (0: unknown mode). */
static uint64_t craft(const char *mode)
{
        static const uint16_t types[6] = {T_JSFUNCTION, T_SFI, T_SCRIPT, T_SEQ_ONE, T_CONS_ONE, 99};
        for (int i = 0; i < 6; i++) {
                maps[i].map = tag(&maps[5]);
                maps[i].type = types[i];
        }
        function.w[0] = tag(&maps[0]);
        function.w[3] = tag(&sfi);
        sfi.w[0] = tag(&maps[1]);
        sfi.w[1] = tag(&name);
        sfi.w[2] = tag(&script);
        script.w[0] = tag(&maps[2]);
        script.w[1] = tag(&file);
        script.w[2] = tag(&file);
        string_of(&name, &maps[3], "toldName", 8);
        string_of(&file, &maps[3], "told.js", 7);
        memset(&junk, 0x5a, sizeof(junk));
        if (strcmp(mode, "told") == 0)
                return tag(&function);
        if (strcmp(mode, "junk") == 0)
                return tag(&junk);
        if (strcmp(mode, "unmapped") == 0) {
                void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                return p == MAP_FAILED ? 0 : tag(p);
        }
        if (strcmp(mode, "cycle") == 0) {
                cons.map = tag(&maps[4]);
                cons.length = 1 << 20;
                cons.first = cons.second = tag(&cons);
                sfi.w[1] = tag(&cons);
                return tag(&function);
        }
        if (strcmp(mode, "huge") == 0) {
                string_of(&huge, &maps[3], "hugeName", INT32_MAX);
                sfi.w[1] = tag(&huge);
                return tag(&function);
        }
        return 0;
}

/* push rbp; mov rbp,rsp; push rdi (context); push rsi (function); a loop of rdx; leave; ret */
static const uint8_t code[] = {
    0x55, 0x48, 0x89, 0xe5, 0x57, 0x56, 0x48, 0xff, 0xca, 0x75, 0xfb, 0xc9, 0xc3,
};
typedef void (*frame_fn)(uint64_t context, uint64_t function, uint64_t n);

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void driver(frame_fn f, uint64_t fn, double seconds)
{
        double end = now() + seconds;
        while (now() < end)
                f(tag(&script), fn, 1000000);
}

int main(int argc, char **argv)
{
        double seconds = 3;
        const char *ready = NULL;
        static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
                                             {"ready", required_argument, NULL, 'r'},
                                             {0}};
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (c == 's')
                        seconds = atof(optarg);
                else if (c == 'r')
                        ready = optarg;
                else
                        return 2;
        }
        uint64_t fn = optind < argc ? craft(argv[optind]) : 0;
        if (!fn) {
                fprintf(stderr, "usage: fakev8 told|junk|unmapped|cycle|huge [--seconds S] "
                                "[--ready FILE]\n");
                return 2;
        }
        void *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
                return 1;
        memcpy(mem, code, sizeof(code));
        printf("%d\n", (int)getpid());
        fflush(stdout);
        if (ready) {
                FILE *r = fopen(ready, "w");
                if (r)
                        fclose(r);
        }
        driver((frame_fn)mem, fn, seconds);
        return 0;
}
