/* SPDX-License-Identifier: MIT */
/*
 * What hotspot.c (the layouts, methods' names) and hotspot-code.c (the
 * code cache) share of one JVM: the fields read of its VMStructs and
 * VMTypes, and bounded reads of its memory.
 */
#pragma once

#include "hotspot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What is read of the layouts: a field's offset (a static field's
 * address). The first N_NAME_FIELDS name a method; the rest find code in
 * the code cache (optional: without them compiled code is not read).
 */
enum {
        F_METHOD_CONST,    /* Method::_constMethod */
        F_CONST_CONSTANTS, /* ConstMethod::_constants */
        F_CONST_NAME,      /* ConstMethod::_name_index */
        F_CONST_SIGNATURE, /* ConstMethod::_signature_index */
        F_POOL_HOLDER,     /* ConstantPool::_pool_holder */
        F_POOL_LENGTH,     /* ConstantPool::_length */
        F_KLASS_NAME,      /* Klass::_name */
        F_SYMBOL_LENGTH,   /* Symbol::_length */
        F_SYMBOL_BODY,     /* Symbol::_body */
        N_NAME_FIELDS,
        F_CODE_HEAPS = N_NAME_FIELDS, /* CodeCache::_heaps (static: its address) */
        F_ARRAY_LEN,                  /* GrowableArrayBase::_len */
        F_ARRAY_DATA,                 /* GrowableArray<int>::_data */
        F_HEAP_MEMORY,                /* CodeHeap::_memory (a VirtualSpace) */
        F_HEAP_SEGMAP,                /* CodeHeap::_segmap (a VirtualSpace) */
        F_HEAP_LOG2_SEGMENT,          /* CodeHeap::_log2_segment_size */
        F_SPACE_LOW,                  /* VirtualSpace::_low */
        F_SPACE_HIGH,                 /* VirtualSpace::_high */
        F_BLOCK_HEADER,               /* HeapBlock::_header */
        F_BLOCK_USED,                 /* HeapBlock::Header::_used */
        F_BLOB_NAME,                  /* CodeBlob::_name */
        F_BLOB_FRAME_COMPLETE,        /* CodeBlob::_frame_complete_offset */
        F_BLOB_FRAME_SIZE,            /* CodeBlob::_frame_size (words) */
        F_BLOB_CODE_BEGIN,            /* CodeBlob::_code_begin */
        F_BLOB_CODE_END,              /* CodeBlob::_code_end */
        F_COMPILED_METHOD,            /* CompiledMethod::_method */
        F_COMPILED_SCOPES_DATA,       /* CompiledMethod::_scopes_data_begin */
        F_NMETHOD_STUB,               /* nmethod::_stub_offset */
        F_NMETHOD_METADATA,           /* nmethod::_metadata_offset */
        F_NMETHOD_SCOPES_PCS,         /* nmethod::_scopes_pcs_offset */
        F_NMETHOD_DEPENDENCIES,       /* nmethod::_dependencies_offset */
        F_NMETHOD_VERIFIED_ENTRY,     /* nmethod::_verified_entry_point */
        F_NMETHOD_COMPILE_ID,         /* nmethod::_compile_id */
        F_PCDESC_PC,                  /* PcDesc::_pc_offset */
        F_PCDESC_SCOPE,               /* PcDesc::_scope_decode_offset */
        N_FIELDS
};

/* Type sizes read: the entries of a ConstantPool follow it; a blob follows its HeapBlock. */
enum { T_CONSTANT_POOL, T_HEAP_BLOCK, T_PCDESC, T_NMETHOD, N_TYPES };

struct fp_hotspot_method_slot {
        uint64_t method; /* 0: a free slot */
        char *name;      /* NULL: it gave none */
};

struct fp_hotspot_code_cache; /* hotspot-code.c */

struct fp_hotspot {
        pid_t pid;
        uint64_t off[N_FIELDS];
        uint64_t found; /* the fields found: 1 << F_... */
        uint64_t size[N_TYPES];
        struct fp_hotspot_method_slot *slots;
        size_t n_slots, n_used, n_named, n_failed;
        struct fp_hotspot_code_cache *code; /* NULL until first asked, or when it cannot be */
        bool code_tried, code_final; /* final: never readable (fields missing, process gone) */
        uint64_t code_retry_ns;      /* not tried again before (CLOCK_MONOTONIC) */
        char code_why[160];          /* why compiled code is not read ("" while it is) */
};

/* len bytes at addr in the JVM; false when they cannot all be read. */
bool fp_hotspot_peek(pid_t pid, uint64_t addr, void *buf, size_t len);
/* The 8 bytes at addr, as fp_hotspot_peek() reads them. */
bool fp_hotspot_peek_u64(pid_t pid, uint64_t addr, uint64_t *ret);
/* A NUL-terminated string at addr (at most len - 1 bytes, read page by page). */
bool fp_hotspot_peek_cstr(pid_t pid, uint64_t addr, char *buf, size_t len);
/* Frees what hotspot-code.c holds of h. */
void fp_hotspot_code_free(struct fp_hotspot *h);
