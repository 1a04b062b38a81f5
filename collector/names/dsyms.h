/* SPDX-License-Identifier: MIT */
/*
 * The names of one build, as the collector reads them from files a
 * debuginfod server sent (debuginfod.h fetches them): the function
 * symbols of its debug file, and where its executable's segments lie in
 * the file, so that an address the agent could not name (a file offset in
 * a stripped binary: the pprof location's address less its mapping's
 * start, plus the mapping's file offset) becomes a virtual address and
 * then a function.
 *
 * A debug file keeps the executable's program headers' addresses but not
 * their file offsets (objcopy --only-keep-debug writes its own), so the
 * segments come from the executable's first bytes: its ELF header and
 * program headers, which debuginfod serves as /buildid/ID/executable.
 * An agent that read the executable says where each mapping's ELF
 * addresses begin (fp_dsyms_name_at()): then the debug file alone names
 * its frames, and the segments are not needed (none: n_segs 0).
 *
 * Everything here is read from files an outside server chose: sizes and
 * counts are bounded, every offset is checked, and a file that is not what
 * it says (another build, no symbols, cut short) is refused with one line.
 * A loaded struct fp_dsyms never changes; its reference count is atomic,
 * so threads may share it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FP_DSYMS_HEAD_BYTES  65536u     /* read of an executable: its headers lie here */
#define FP_DSYMS_MAX_SYMBOLS 8000000u   /* of one debug file */
#define FP_DSYMS_MAX_SEGS    64u        /* PT_LOAD entries of one executable */
#define FP_DSYMS_NAMES_SLACK (1u << 20) /* names may take four times the file and this */

struct fp_dsyms;

/* A segment of the executable: file bytes [offset, offset + filesz) at vaddr. */
struct fp_dsyms_seg {
        uint64_t offset, filesz, vaddr;
};

/*
 * The PT_LOAD segments of an executable from its first len bytes (ELF
 * header and program headers, 32 or 64 bits, either byte order): the
 * count, or -EBADMSG with one line in err when they are not there.
 */
int fp_dsyms_segments(const uint8_t *head, size_t len, struct fp_dsyms_seg *out, size_t max,
                      char *err, size_t errlen);

/*
 * Loads the function symbols of the debug file at path, which must carry
 * build_id (lower-case hex), with the executable's segments: 0 with *ret
 * (one reference), -EBADMSG (not ELF, another build, no function symbols),
 * -EFBIG (too many, or names in memory past four times the file's size and
 * FP_DSYMS_NAMES_SLACK), -ENOMEM or another -errno with one line in err. C++
 * and Rust names are demangled once here; the symbol stays the system name.
 */
int fp_dsyms_load(const char *path, const char *build_id, const struct fp_dsyms_seg *segs,
                  size_t n_segs, struct fp_dsyms **ret, char *err, size_t errlen);

/*
 * The same from a file's bytes in memory (an upload: a debug file, or an
 * unstripped executable, whose own program headers then place the
 * agents' file offsets too). data must outlive the call only.
 */
int fp_dsyms_load_mem(const uint8_t *data, size_t len, const char *build_id, struct fp_dsyms **ret,
                      char *err, size_t errlen);

/*
 * What an upload is before it is kept: an ELF file whose sections all lie
 * within len bytes, with a build ID (into id, lower-case hex; at least
 * FP_DSYMS_ID_HEX bytes) and a symbol table; *ret_executable when its code
 * is there too (.text has bytes, program headers present). 0, or
 * -EBADMSG with one line in err.
 */
#define FP_DSYMS_ID_HEX 129
int fp_dsyms_inspect(const uint8_t *data, size_t len, char *id, bool *ret_executable, char *err,
                     size_t errlen);

struct fp_dsyms *fp_dsyms_ref(struct fp_dsyms *d);
/* Accepts NULL. */
void fp_dsyms_unref(struct fp_dsyms *d);

/*
 * The function at file offset off: its name (NULL: none, or no segments
 * to place off in) and, when it was demangled, the symbol in *ret_system
 * (else NULL). The strings live as long as d.
 */
const char *fp_dsyms_name(const struct fp_dsyms *d, uint64_t off, const char **ret_system);

/* The same at the ELF virtual address vaddr (the agent said where its mapping begins). */
const char *fp_dsyms_name_at(const struct fp_dsyms *d, uint64_t vaddr, const char **ret_system);

/* Memory d holds, bytes; its number of functions. */
size_t fp_dsyms_bytes(const struct fp_dsyms *d);
size_t fp_dsyms_count(const struct fp_dsyms *d);
