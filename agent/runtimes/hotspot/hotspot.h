/* SPDX-License-Identifier: MIT */
/*
 * Interpreted Java methods named from a running HotSpot JVM. An
 * interpreted frame keeps its method (a Method*) in a fixed slot below its
 * frame pointer (HOTSPOT_FRAME_METHOD_OFFSET, x86-64); the method's name,
 * class and signature are read from the JVM's memory (process_vm_readv)
 * with the layouts the JVM itself publishes for debuggers: the VMStructs
 * and VMTypes tables libjvm.so exports (gHotSpotVMStructs, ...), which
 * give each field's offset and each type's size:
 *
 *   Method::_constMethod -> ConstMethod::_constants (the ConstantPool),
 *                           _name_index, _signature_index
 *   ConstantPool: its entries follow it (sizeof(ConstantPool) on), a
 *                 Symbol* each; _pool_holder -> Klass::_name
 *   Symbol: _length (u2) bytes at _body
 *
 * A method reads as the perf map names compiled code, "void
 * Shares.alpha()" (return type, class, name, parameter types), so its
 * interpreted and compiled time add up under one name. Names are cached
 * per Method* (at most FP_HOTSPOT_MAX_METHODS); every read is bounded and
 * checked, and a value that does not hold together gives no name.
 *
 * Single-threaded: the agent's event loop.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HOTSPOT_FRAME_METHOD_OFFSET (-24) /* from rbp: frame::interpreter_frame_method_offset */
#define FP_HOTSPOT_MAX_METHODS      65536
#define FP_HOTSPOT_MAX_NAME         512

struct fp_hotspot;

/*
 * Reads the layouts of the JVM pid from its libjvm.so (path as the process
 * sees it, mapped at start from file offset pgoff). 0 and *ret, or -errno
 * with one line in why (-ESRCH: the process is gone).
 */
int fp_hotspot_open(pid_t pid, const char *path, uint64_t start, uint64_t pgoff,
                    struct fp_hotspot **ret, char *why, size_t len);
void fp_hotspot_free(struct fp_hotspot *h);
/*
 * The name of the method at method in the JVM's memory, read while it
 * lives and cached; NULL when it cannot be read (then not tried again).
 */
const char *fp_hotspot_method(struct fp_hotspot *h, uint64_t method);
/*
 * Compiled code, read from the JVM's code cache (hotspot-code.c): the
 * CodeCache's heaps, each a VirtualSpace of segments whose segment map
 * leads from any address back to its block's start (a HeapBlock, the
 * CodeBlob after it). An nmethod (a compiled Java method) gives its
 * Method*, its frame's size, and its scopes: each PcDesc (a code offset)
 * leads to a chain of (method, bci) in its scopes data, the methods
 * inlined at that place innermost first, each method an index into the
 * nmethod's metadata. So a sample is named when it is taken, not when its
 * bucket is written (code is freed and reused), and inlined methods show.
 *
 * A compiled frame's caller is found by its size: in the method's body
 * its return address is at rsp + frame size - 8, and the caller's rbp
 * below it (C1 and C2 both save it there, with or without
 * -XX:+PreserveFramePointer). Where the thread was, in a prologue or an
 * epilogue, the few instructions HotSpot emits there are read from its
 * code and stepped; in a method's stubs, or a prologue with anything
 * else, the frame is not known. A blob is trusted FP_HOTSPOT_CODE_CHECK_NS
 * after it was read, then read again (freed code is reused).
 */
#define FP_HOTSPOT_MAX_INLINE    16 /* methods of one compiled frame */
#define FP_HOTSPOT_CODE_CHECK_NS 500000000ULL
#define FP_HOTSPOT_MAX_BLOBS     4096
#define FP_HOTSPOT_CODE_BYTES    (4u << 20) /* of blobs' scopes held, at most (a JVM) */

enum fp_hotspot_frame {
        FP_HOTSPOT_FRAME_UNKNOWN, /* its caller cannot be told */
        FP_HOTSPOT_FRAME_SIZE,    /* CFA = rsp + cfa; rbp at CFA + rbp_off when rbp_saved */
        FP_HOTSPOT_FRAME_RBP,     /* keeps a frame pointer (the interpreter, stubs, wrappers) */
};

/* What the code cache says of one code address. */
struct fp_hotspot_code {
        bool compiled; /* in a compiled Java method (an nmethod, or a native method's wrapper) */
        /* Its methods at that address, innermost (inlined) first, the compiled one last. */
        uint64_t methods[FP_HOTSPOT_MAX_INLINE];
        unsigned n_methods;
        enum fp_hotspot_frame frame;
        uint32_t cfa;
        bool rbp_saved;
        int32_t rbp_off;
        /* Not compiled: the blob's name ("Interpreter", "StubRoutines (1)"), while h lives. */
        const char *name;
};

/* Counts of the code cache's reads. */
struct fp_hotspot_code_stats {
        uint64_t lookups, blobs_read, not_found;
        uint64_t inlined;       /* lookups that found methods inlined */
        uint64_t scopes_failed; /* a chain of scopes that did not hold together: its method alone */
        uint64_t frames_unknown; /* compiled frames whose caller could not be told */
};

/*
 * What holds code address pc in the JVM's code cache: 1 and *ret when a
 * blob does, 0 when none does or the code cache cannot be read
 * (fp_hotspot_code_why()), -ESRCH when the process is gone. leaf: pc is
 * where the thread was; else it is a return address.
 */
int fp_hotspot_code_at(struct fp_hotspot *h, uint64_t pc, bool leaf, struct fp_hotspot_code *ret);
/*
 * The frame at upto bytes into a compiled method's prologue, whose code
 * from its verified entry on is p (n bytes, n >= upto): steps what
 * HotSpot's compilers emit there (a stack bang, push rbp, mov rbp,rsp,
 * sub rsp, mov [rsp+d],rbp, add rbp, nops) into r's cfa and rbp_saved,
 * rbp_off. False when another instruction comes first, or upto is not
 * where one starts.
 */
bool fp_hotspot_prologue(const uint8_t *p, size_t n, size_t upto, struct fp_hotspot_code *r);
/* Whether the code cache can be read (tried at once, and a second later while it is not yet). */
bool fp_hotspot_code_ok(struct fp_hotspot *h);
/* Why compiled code is not read ("" while it is, or before it was tried). */
const char *fp_hotspot_code_why(const struct fp_hotspot *h);
void fp_hotspot_code_stats(const struct fp_hotspot *h, struct fp_hotspot_code_stats *ret);
/* The code heaps' bounds [low, high), at most max of them; how many there are. */
size_t fp_hotspot_code_heaps(struct fp_hotspot *h, uint64_t *low, uint64_t *high, size_t max);

/* Methods named so far, and Method* values that gave none. */
size_t fp_hotspot_n_named(const struct fp_hotspot *h, size_t *ret_failed);
/*
 * A JVM signature ("(ILjava/lang/String;)V") with class and name written as
 * the perf map writes a method: "void Cls.name(int, java.lang.String)".
 * False when sig is not one (out is then "").
 */
bool fp_hotspot_format(const char *cls, const char *name, const char *sig, char *out, size_t len);
