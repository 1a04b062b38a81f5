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
/* Methods named so far, and Method* values that gave none. */
size_t fp_hotspot_n_named(const struct fp_hotspot *h, size_t *ret_failed);
/*
 * A JVM signature ("(ILjava/lang/String;)V") with class and name written as
 * the perf map writes a method: "void Cls.name(int, java.lang.String)".
 * False when sig is not one (out is then "").
 */
bool fp_hotspot_format(const char *cls, const char *name, const char *sig, char *out, size_t len);
